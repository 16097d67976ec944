"""Right answers and planted bugs of 10.7, one module per exercise."""
