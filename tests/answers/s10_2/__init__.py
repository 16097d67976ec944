"""Right answers and planted bugs of 10.2, one module per exercise."""
