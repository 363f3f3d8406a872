"""transforms package."""
