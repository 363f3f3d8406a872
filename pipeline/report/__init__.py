"""The static HTML report (`fleetgrade report`): DuckDB queries and self-contained HTML rendering."""
