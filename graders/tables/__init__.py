"""Table rows (the issue-30 layer ``graders/tables/``)."""
