"""Safety checks on knowledge text (content is data, never instructions)."""
