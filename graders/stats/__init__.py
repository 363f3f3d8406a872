"""Fleet statistics (docs/statistics.md): clustered intervals, tests and change points, Beam-free."""
