"""Combiner checks in the style of TFDV's combiner tests.

A Beam runner may add inputs one at a time, build one accumulator per bundle and merge them,
or compact accumulators before shuffling. A correct ``CombineFn`` gives the same output for
every such plan; :func:`assert_combiner_equivalent` runs the plans and compares.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apache_beam as beam


def _sequential(fn: beam.CombineFn, inputs: Sequence[Any]) -> Any:
    acc = fn.create_accumulator()
    for x in inputs:
        acc = fn.add_input(acc, x)
    return fn.extract_output(acc)


def assert_combiner_equivalent(fn: beam.CombineFn, inputs: Sequence[Any]) -> Any:
    """Assert every accumulation plan gives one output; return it."""
    fn.setup()
    try:
        per_input = [fn.add_input(fn.create_accumulator(), x) for x in inputs]
        pairs = [fn.merge_accumulators(per_input[i : i + 2]) for i in range(0, len(per_input), 2)]
        outputs = {
            "sequential adds": _sequential(fn, inputs),
            "one accumulator per input, then merge": fn.extract_output(fn.merge_accumulators(per_input)),
            "merge then compact": fn.extract_output(
                fn.compact(fn.merge_accumulators([fn.compact(a) for a in per_input]))
            ),
            "reversed order, nested merges": fn.extract_output(
                fn.merge_accumulators([*reversed(pairs), fn.create_accumulator()])
            ),
        }
    finally:
        fn.teardown()
    reference = outputs["sequential adds"]
    for plan, out in outputs.items():
        assert out == reference, f"{plan}: {out!r} != sequential adds: {reference!r}"
    return reference
