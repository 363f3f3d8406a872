"""One dead letter per (input, stage), whatever the order rows arrive in (the ``dead_letter`` spec's
``one_per_identity``, graders/tables/merge.py)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from graders.grading.normalize import normalize_result
from graders.grading.plan import default_plan
from graders.tables.merge import one_per_identity
from graders.tables.rows import result_rows
from schemas.documents import RunMeta
from schemas.tables import SPECS
from schemas.version import FLEETGRADE_VERSION


def dead(input_path: str, stage: str, error_class: str, message: str) -> dict:
    return {"input": input_path, "stage": stage, "error_class": error_class, "message": message}


def test_one_dead_letter_per_input_and_stage_whatever_the_order():
    rows = [
        dead("wf/run-1", "grade", "ValueError", "b"),
        dead("wf/run-1", "grade", "KeyError", "z"),
        dead("wf/run-1", "grade", "ValueError", "a"),
        dead("wf/run-1", "prepare", "MetadataError", "m"),
        dead("wf/run-2", "grade", "ValueError", "c"),
    ]
    expected = [dead("wf/run-1", "grade", "KeyError", "z"), dead("wf/run-1", "prepare", "MetadataError", "m"),
                dead("wf/run-2", "grade", "ValueError", "c")]
    for seed in range(10):
        shuffled = list(rows)
        random.Random(seed).shuffle(shuffled)
        assert sorted(one_per_identity(SPECS["dead_letter"], shuffled), key=lambda r: (r["input"], r["stage"])) == expected


def _row_by_definition(meta, r, plan, input_digest):  # type: ignore[no-untyped-def]
    """A grader_results row column by column (README.md, "Tables")."""
    from graders.tables.rows import _float, _json_text, _metrics, implementation_digest

    index = next(i for i, e in enumerate(plan.enabled) if e.id == r["id"])
    e = plan.enabled[index]
    impl = r.get("implementation", {})
    return {
        "workflow": meta.workflow, "date": meta.date, "run_id": meta.run_id, "attempt": meta.attempt,
        "grader_id": r["id"], "grader_index": index, "name": r.get("name"), "description": r.get("description"),
        "source": r.get("source"), "family": e.family, "value": _float(r.get("value")), "unit": r.get("unit"),
        "direction": e.direction or None, "threshold": _float(e.threshold), "passed": r.get("passed"),
        "status": r["status"], "severity": r.get("severity"), "message": r.get("message"), "error": r.get("error"),
        "details": r.get("details"), "metrics": _metrics(r.get("metrics")),
        "diagnostics": _json_text(r.get("diagnostics")), "implementation_id": impl.get("id"),
        "implementation_version": impl.get("version"), "implementation_digest": implementation_digest(e),
        "config_digest": plan.digest(), "input_digest": input_digest, "fleetgrade_version": FLEETGRADE_VERSION,
    }


_RAW = st.one_of(
    st.none(), st.integers(-(2**60), 2**60), st.floats(), st.booleans(), st.text(max_size=3),
    st.fixed_dictionaries({}, optional={
        "value": st.one_of(st.none(), st.integers(-5, 5), st.floats()),
        "passed": st.one_of(st.none(), st.booleans()),
        "message": st.sampled_from(["", "m", 0, 1]),
        "details": st.sampled_from(["", "d", None]),
        "severity": st.sampled_from(["error", "note", "other", 3]),
        "metrics": st.lists(st.fixed_dictionaries({"id": st.sampled_from(["a", 1]), "value": st.floats()}), max_size=2),
        "diagnostics": st.dictionaries(st.sampled_from(["b", "a"]), st.integers(0, 3), max_size=2),
    }),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_RAW, min_size=1, max_size=4))
def test_result_rows_are_the_columns_by_definition_in_table_order(raws):
    plan = default_plan()
    entries = plan.enabled[: len(raws)]
    results = [normalize_result(raw, e) for raw, e in zip(raws, entries, strict=False)]
    meta = RunMeta(workflow="wf", run_id="7", attempt=2, date="2026-01-02", root="wf/run-7", metadata_source="layout")
    rows = result_rows(meta, results, plan, "digest")
    assert rows == [_row_by_definition(meta, r, plan, "digest") for r in results]
    columns = [f.name for f in SPECS["grader_results"].schema]
    for row in rows:
        assert [c for c in row if c in columns] == columns  # every stored column, in file order
