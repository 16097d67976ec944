"""Right answers and planted bugs of 10.4, one module per exercise."""
