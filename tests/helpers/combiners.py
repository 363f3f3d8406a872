"""Combiner checks in the style of TFDV's combiner tests.

A Beam runner may add inputs one at a time, build one accumulator per bundle and merge them,
or compact accumulators before shuffling. A correct ``CombineFn`` gives the same output for
every such plan; :func:`assert_combiner_equivalent` runs the plans and compares.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from typing import Any

import apache_beam as beam


def _sequential(fn: beam.CombineFn, inputs: Sequence[Any]) -> Any:
    acc = fn.create_accumulator()
    for x in inputs:
        acc = fn.add_input(acc, x)
    return fn.extract_output(acc)


def _split_batches(fn: beam.CombineFn, inputs: Sequence[Any], rng: random.Random) -> Any:
    """Bundles of random sizes, each accumulated and compacted (a lifted combine's partials),
    then merged."""
    cuts = sorted(rng.sample(range(1, len(inputs)), min(3, max(0, len(inputs) - 1))))
    bounds = [0, *cuts, len(inputs)]
    partials = []
    for lo, hi in itertools.pairwise(bounds):
        acc = fn.create_accumulator()
        for x in inputs[lo:hi]:
            acc = fn.add_input(acc, x)
        partials.append(fn.compact(acc))
    return fn.extract_output(fn.merge_accumulators(partials))


def assert_combiner_equivalent(fn: beam.CombineFn, inputs: Sequence[Any]) -> Any:
    """Assert every accumulation plan gives one output (one batch, split batches merged,
    shuffled order, ...); return it."""
    rng = random.Random(len(inputs))  # reproducible for a given input
    shuffled = list(inputs)
    rng.shuffle(shuffled)
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
            "split batches, compacted, merged": _split_batches(fn, inputs, rng),
            "shuffled order": _sequential(fn, shuffled),
            "shuffled order, split batches": _split_batches(fn, shuffled, rng),
        }
    finally:
        fn.teardown()
    reference = outputs["sequential adds"]
    for plan, out in outputs.items():
        assert out == reference, f"{plan}: {out!r} != sequential adds: {reference!r}"
    return reference
