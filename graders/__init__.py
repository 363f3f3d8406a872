"""The grading core: preprocessing, registry, normalization and grader families. Free of Beam."""
