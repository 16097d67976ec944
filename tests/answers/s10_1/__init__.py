"""Right answers and planted bugs of 10.1, one module per exercise."""
