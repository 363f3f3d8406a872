"""Discovery and the incremental decision in one streamed step, runs to grade shuffled in batches."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest.mock import patch

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from graders.families.trace_rules.config import default_config
from graders.grading.plan import PlanSet, default_plan
from graders.tables.parquet import encode_table
from graders.tables.paths import PART_NAME, partition_path
from graders.tables.state import (
    GradingDigests,
    StoredState,
    graded_state,
    listing_digest,
    listing_fingerprint,
)
from tests.helpers.beam import local_test_pipeline
from tests.transforms.test_graph import make_fleet
from transforms.discover import list_run
from transforms.incremental import (
    KEEP,
    DiscoverAndDecide,
    _ListAndDecide,
    batch_runs,
    kept_identity,
    stored_rows_of,
    unbatch_runs,
)

ROOTS = ("wf-a/run-11", "wf-b/2026-05-03/77", "wf-b/run-12")  # make_fleet's run folders


def _decide(base: str, stored: list[dict[str, Any]], **options: Any) -> tuple[list[Any], list[Any], list[int]]:
    """(runs to grade, kept state rows, batch keys) of one pass over ``base``."""
    plans, cfg = PlanSet(default_plan()), default_config()
    fn = _ListAndDecide(base, base + "/out", plans, cfg, **{"full": False, "since": None, "until": None, **options})
    fn.setup()
    with patch("transforms.incremental.stored_state", return_value=StoredState(stored)):
        out = list(fn.process(None))
    kept = [o.value for o in out if isinstance(o, beam.pvalue.TaggedOutput) and o.tag == KEEP]
    batches = [o for o in out if not isinstance(o, beam.pvalue.TaggedOutput)]
    todo = [run for key, blob in batches for run in unbatch_runs((key, [blob]))]
    return todo, kept, [key for key, _ in batches]


def _state(tmp_path: Path) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    base = str(tmp_path)
    digests = GradingDigests(PlanSet(default_plan()), default_config())
    now = {root: listing_digest(list_run(base, root)) for root in ROOTS}
    rows = {
        "unchanged": graded_state(f"{base}/wf-a/run-11", now["wf-a/run-11"], digests.for_workflow("wf-a"),
                                  "wf-a", "2026-05-01", "11", 1),
        "changed": graded_state(f"{base}/wf-b/2026-05-03/77", "0" * 64, digests.for_workflow("wf-b"),
                                "wf-b", "2026-05-03", "77", 1),
        "gone": graded_state(f"{base}/wf-c/run-5", "1" * 64, digests.for_workflow("wf-c"), "wf-c", "2026-04-01", "5", 1),
    }
    return now, rows


def test_each_listed_run_is_graded_or_kept_and_gone_folders_keep_their_state(tmp_path: Path) -> None:
    make_fleet(tmp_path)
    now, rows = _state(tmp_path)
    todo, kept, keys = _decide(str(tmp_path), list(rows.values()), batch=1)
    assert sorted(todo, key=lambda r: r[0]) == [
        ("wf-b/2026-05-03/77", listing_fingerprint(now["wf-b/2026-05-03/77"]), rows["changed"], []),
        ("wf-b/run-12", listing_fingerprint(now["wf-b/run-12"]), None, []),
    ]
    assert sorted(kept, key=lambda r: r["root"]) == [rows["unchanged"], rows["gone"]]
    assert keys == [0, 1], "one key per batch, in listing order"


def test_window_and_full_regrade(tmp_path: Path) -> None:
    make_fleet(tmp_path)
    _, rows = _state(tmp_path)
    todo, kept, _ = _decide(str(tmp_path), list(rows.values()), since="2026-05-02")
    assert rows["unchanged"] in kept and {r[0] for r in todo} == {"wf-b/2026-05-03/77", "wf-b/run-12"}
    todo, kept, keys = _decide(str(tmp_path), list(rows.values()), full=True)
    assert {r[0] for r in todo} == set(ROOTS) and kept == [rows["gone"]]
    assert keys == [0], "three runs fit one batch"


def test_two_stored_rows_of_one_folder_give_the_same_previous_each_time(tmp_path: Path) -> None:
    make_fleet(tmp_path)
    _, rows = _state(tmp_path)
    twin = {**rows["changed"], "date": "2026-05-04"}
    first, _, _ = _decide(str(tmp_path), [rows["changed"], twin])
    second, _, _ = _decide(str(tmp_path), [twin, rows["changed"]])
    assert first == second and [r[2] for r in first if r[0] == "wf-b/2026-05-03/77"] == [rows["changed"]]


def test_batches_round_trip_every_field() -> None:
    runs = [(f"wf/run-{i}", bytes([i % 256]) * 8, None if i % 2 else {"root": "r", "attempt": 1, "run_id": None},
             [] if i % 3 else [["wf/s.jsonl", "wf", str(i), 1, {"input": "wf/s.jsonl"}]]) for i in range(70)]
    assert list(unbatch_runs((0, [batch_runs(runs[:40]), batch_runs(runs[40:])]))) == runs


def test_discover_and_decide_in_a_pipeline(tmp_path: Path) -> None:
    make_fleet(tmp_path)
    base = str(tmp_path)
    now = {root: listing_fingerprint(listing_digest(list_run(base, root))) for root in ROOTS}
    with local_test_pipeline() as p:
        todo, kept, _ = p | DiscoverAndDecide(base, str(tmp_path / "out"), PlanSet(default_plan()), default_config())
        assert_that(todo, equal_to([(root, now[root], None, []) for root in ROOTS]), label="todo")
        assert_that(kept, equal_to([]), label="kept")


def _verdict(run_id: str, attempt: int) -> dict[str, Any]:
    return {"run_id": run_id, "attempt": attempt, "task": "wf#1", "verdict": "clean-pass", "delivered": True,
            "step_count": 1, "corrupt_success": False, "flags": [], "fleetgrade_version": "0"}


def test_carried_rows_are_read_per_partition_for_the_kept_runs_only(tmp_path: Path) -> None:
    """task_reliability's stored verdicts: one partition file read per group of kept runs."""
    out = tmp_path / "out"
    for (workflow, date), rows in {("wf a", "2026-05-01"): [_verdict("1", 1), _verdict("1", 2), _verdict("2", 1)],
                                   (None, None): [_verdict("3", 1)]}.items():
        part = out / partition_path("trace_verdicts", workflow, date)
        part.mkdir(parents=True)
        (part / PART_NAME).write_bytes(encode_table("trace_verdicts", rows))
    kept = [{"workflow": "wf a", "date": "2026-05-01", "run_id": "1", "attempt": 2, "outcome": "graded"},
            {"workflow": "wf a", "date": "2026-05-01", "run_id": "2", "attempt": 1, "outcome": "graded"},
            {"workflow": None, "date": None, "run_id": "3", "attempt": 1, "outcome": "graded"},
            {"workflow": "wf b", "date": "2026-05-01", "run_id": "4", "attempt": 1, "outcome": "graded"}]
    with local_test_pipeline() as p:
        carried = (
            p | beam.Create(kept) | beam.Map(kept_identity) | beam.GroupByKey()
            | beam.FlatMap(lambda kv: stored_rows_of(str(out), "trace_verdicts", kv))
            | beam.Map(lambda r: (r["workflow"], r["date"], r["run_id"], r["attempt"], r["verdict"]))
        )
        # run 1's first attempt is not kept; wf b has no stored partition (nothing, no error)
        assert_that(carried, equal_to([("wf a", "2026-05-01", "1", 2, "clean-pass"),
                                       ("wf a", "2026-05-01", "2", 1, "clean-pass"),
                                       (None, None, "3", 1, "clean-pass")]))
