"""Rule-based trace grading, behaviour-compatible with the public trace-grader skill.

Spec: docs/reference/trace-grader.md. Deviations: docs/deviations-trace-grader.md.
"""
