"""Grader families (the issue-30 layer ``graders/families/``)."""
