"""Rule-based trace grading, behaviour-compatible with the public trace-grader skill.

Spec: shared/spec/trace-grader.md. Deviations: docs/deviations-trace-grader.md.
"""
