"""Right answers and planted bugs of 10.8, one module per exercise."""
