"""Right answers and planted bugs of 10.3, one module per exercise."""
