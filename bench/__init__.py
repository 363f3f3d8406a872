"""Benchmarks (``make bench``): figures are ratios against baselines measured in the same run."""
