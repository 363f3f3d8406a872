"""Readers of a run's input formats (the issue-30 layer ``graders/formats/``)."""
