from __future__ import annotations

import apache_beam as beam
import pyarrow as pa
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing import test_pipeline
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.combiners import TupleCombineFn
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.families.trace_rules.config import default_config
from graders.families.trace_rules.verdicts import grade
from graders.formats.model import Run, Step
from schemas.partitions import file_schema
from schemas.trace_tables import TASK_RELIABILITY, TRACE_VERDICTS
from schemas.version import FLEETGRADE_VERSION
from tests.helpers.combiners import assert_combiner_equivalent
from transforms.reliability import (
    PassKCombineFn,
    task_reliability_row,
    trace_verdict_rows,
)


def test_combiner_plans_agree_on_worked_example():
    out = assert_combiner_equivalent(PassKCombineFn(max_k=2), [True, True, False, True])
    assert out["n"] == 4 and out["c"] == 3 and out["pass_hat_k_strict"] is False
    assert out["pass_k"][1] == {"k": 2, "pass_hat_k": 0.5, "pass_at_k": 1.0}


@settings(max_examples=50, deadline=None)
@given(st.lists(st.booleans(), max_size=12))
def test_combiner_plans_agree(outcomes):
    assert_combiner_equivalent(PassKCombineFn(max_k=3), outcomes)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.dates().map(str)), min_size=1, max_size=12), st.data())
def test_partials_merged_agree_with_one_combine(inputs, data):
    """TaskReliability combines batches of each collection into partials, flattens them, and merges: the same
    output as one combine over every input, whatever the split and the plan on either side."""
    fn = TupleCombineFn(PassKCombineFn(max_k=3), max)
    cuts = sorted(data.draw(st.lists(st.integers(1, len(inputs)), max_size=3)))
    parts = [inputs[a:b] for a, b in zip([0, *cuts], [*cuts, len(inputs)], strict=True) if b > a]
    partials = []
    for part in parts:  # what CombineInBundle flushes: a batch's compacted accumulator
        acc = fn.create_accumulator()
        for x in part:
            acc = fn.add_input(acc, x)
        partials.append(fn.compact(acc))
    whole = assert_combiner_equivalent(fn, inputs)
    assert fn.extract_output(fn.merge_accumulators(partials)) == whole
    assert fn.extract_output(fn.merge_accumulators(partials[::-1])) == whole
    assert whole[1] == max(d for _, d in inputs)


def test_combine_per_key_in_pipeline():
    data = [(("wf", "t1"), True), (("wf", "t1"), False), (("wf", "t2"), True), (("other", "t1"), True)]
    fn = PassKCombineFn(max_k=1)
    expected = [
        (("wf", "t1"), {"n": 2, "c": 1, "pass_hat_k_strict": False,
                        "pass_k": [{"k": 1, "pass_hat_k": 0.5, "pass_at_k": 0.5}]}),
        (("wf", "t2"), {"n": 1, "c": 1, "pass_hat_k_strict": True,
                        "pass_k": [{"k": 1, "pass_hat_k": 1.0, "pass_at_k": 1.0}]}),
        (("other", "t1"), {"n": 1, "c": 1, "pass_hat_k_strict": True,
                           "pass_k": [{"k": 1, "pass_hat_k": 1.0, "pass_at_k": 1.0}]}),
    ]
    with test_pipeline.TestPipeline(runner=FnApiRunner()) as p:
        out = p | beam.Create(data) | beam.CombinePerKey(fn)
        assert_that(out, equal_to(expected))


def test_rows_fit_the_arrow_schemas():
    runs = [
        Run("t", "r1", True, [Step(1, "Edit", {"file_path": "a.py"})]),
        Run("t", "r2", False, [Step(i, "x") for i in range(1, 43)]),
    ]
    rows = trace_verdict_rows(grade(runs, default_config()), "wf", "2026-12-02", attempt=1)
    table = pa.Table.from_pylist(rows, schema=TRACE_VERDICTS)
    assert table.column("verdict").to_pylist() == ["pass-with-warnings", "fail"]
    assert table.column("flags").to_pylist()[1][0]["tool"] is None
    out = PassKCombineFn(max_k=3).extract_output(PassKCombineFn().create_accumulator().add(True).add(False))
    rel = pa.Table.from_pylist([task_reliability_row(("wf", "t"), out, "2026-12-02")], schema=TASK_RELIABILITY)
    row = rel.to_pylist()[0]
    assert row["fleetgrade_version"] == FLEETGRADE_VERSION
    assert row["pass_k"][2] == {"k": 3, "pass_hat_k": None, "pass_at_k": None}
    assert "workflow" not in file_schema(TASK_RELIABILITY).names


def test_task_reliability_over_batches_and_parts_is_one_combine(monkeypatch):
    """Two collections, combined in batches of two verdicts and merged after the shuffle, give
    each task the row one combine over all its runs gives."""
    import transforms.trace_verdicts as tv
    from tests.helpers.beam import local_test_pipeline

    monkeypatch.setattr(tv, "FLUSH_RUNS", 2)
    rows = [{"workflow": "wf", "task": f"t{i % 3}", "delivered": i % 4 != 0, "date": f"2026-11-0{1 + i % 5}"}
            for i in range(14)]
    fn = PassKCombineFn()
    expected = []
    for task in ("t0", "t1", "t2"):
        mine = [r for r in rows if r["task"] == task]
        out = assert_combiner_equivalent(fn, [r["delivered"] for r in mine])
        expected.append(task_reliability_row(("wf", task), out, max(r["date"] for r in mine)))
    with local_test_pipeline() as p:
        parts = (p | "A" >> beam.Create(rows[:9]), p | "B" >> beam.Create(rows[9:]))
        assert_that(parts | tv.TaskReliability(), equal_to(expected))
