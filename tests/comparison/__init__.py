"""Comparison tests: our scorers against other libraries and against the formulas."""
