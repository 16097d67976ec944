"""Right answers and planted bugs of 10.9, one module per exercise."""
