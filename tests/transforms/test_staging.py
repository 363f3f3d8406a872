"""Staging: rows leave as packed chunks in shard files; only their references are output, and
what waits in memory is bounded over every StageRows of a process together."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.beam import local_test_pipeline
from transforms import staging
from transforms.staging import (
    CHUNK_ROWS,
    ChunkRef,
    PartitionKey,
    StageRows,
    chunk_ref,
    process_budget,
    read_chunks,
    ref_spans,
)


@pytest.fixture(autouse=True)
def _own_budgets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's StageRows share budgets with each other only, not with another test's."""
    monkeypatch.setattr(staging, "_BUDGETS", {})


def _rows(n: int, workflow: str = "wf-a", date: str = "2026-05-01") -> list[dict[str, object]]:
    return [{"workflow": workflow, "date": date, "run_id": str(i), "attempt": 1} for i in range(n)]


def _started(table: str, tmp_path: Path, rows: int = 1024, packed: int = 1 << 20) -> StageRows:
    fn = StageRows(table, str(tmp_path), pending_rows=rows, packed_bytes=packed)
    fn.setup()
    fn.start_bundle()
    return fn


def _finished(fn: StageRows) -> list[tuple[PartitionKey, ChunkRef]]:
    return [wv.value for wv in fn.finish_bundle()]


def _read(tmp_path: Path, table: str, refs: list[tuple[PartitionKey, ChunkRef]]) -> Iterator[dict[str, object]]:
    return read_chunks(str(tmp_path), table, (ref for _, ref in refs))


def test_stage_rows_writes_chunks_before_the_bundle_ends(tmp_path: Path) -> None:
    """A bundle holding the whole fleet (the local runner's) must not keep its rows until finish_bundle."""
    fn = _started("runs", tmp_path, packed=1)
    rows = _rows(CHUNK_ROWS)
    emitted = [ref for row in rows for ref in fn.process(row)]
    emitted += fn.process(_rows(1, date="2026-05-02")[0])  # written refs leave with the next element
    assert emitted, "a full chunk is written and referenced while the bundle is still running"
    assert {key for key, _ in emitted} == {("runs", "wf-a", "2026-05-01")}
    assert list(_read(tmp_path, "runs", emitted)) == rows
    assert [key for key, _ in _finished(fn)] == [("runs", "wf-a", "2026-05-02")]


def test_staged_rows_read_back_per_partition(tmp_path: Path) -> None:
    rows = _rows(150) + _rows(70, "wf-b") + _rows(3, "wf-b", "2026-05-02")
    with local_test_pipeline() as p:
        got = (
            p
            | beam.Create(rows)
            | beam.ParDo(StageRows("runs", str(tmp_path), packed_bytes=2000))
            | beam.GroupByKey()
            | beam.Map(lambda kv: (kv[0], sorted(int(r["run_id"]) for r in read_chunks(str(tmp_path), "runs", kv[1]))))
        )
        assert_that(got, equal_to([
            (("runs", "wf-a", "2026-05-01"), list(range(150))),
            (("runs", "wf-b", "2026-05-01"), list(range(70))),
            (("runs", "wf-b", "2026-05-02"), list(range(3))),
        ]))


def test_rows_waiting_over_many_partitions_are_bounded(tmp_path: Path) -> None:
    """A long history touches thousands of partitions: their part-filled chunks must not all wait."""
    fn = _started("runs", tmp_path, rows=100, packed=1)
    days = [f"2026-{1 + d // 28:02d}-{1 + d % 28:02d}" for d in range(101)]
    rows = [row for day in days for row in _rows(2, date=day)]  # 2 rows per partition, far below a chunk
    emitted = []
    for row in rows:
        emitted += fn.process(row)
        assert fn.budget.rows == fn.held.pending_rows <= 100
        assert sum(map(len, fn.held.pending.values())) == fn.held.pending_rows
    emitted += _finished(fn)
    assert len({key for key, _ in emitted}) == len(days)
    got = sorted((r["date"], r["run_id"]) for r in _read(tmp_path, "runs", emitted))
    assert got == sorted((r["date"], r["run_id"]) for r in rows)


def test_one_reference_per_partition_and_shard(tmp_path: Path) -> None:
    """Chunks of one partition in one shard file travel as one reference: with a long history a
    chunk holds a few rows, and a reference per chunk made the shuffle grow with the rows."""
    fn = _started("runs", tmp_path, rows=1000, packed=1 << 30)  # one shard for the whole bundle
    days = [f"2026-{1 + d // 28:02d}-{1 + d % 28:02d}" for d in range(100)]
    # Rows spread over 100 partitions: each pending flush packs a chunk of ~5 rows per partition.
    rows = [{**_rows(1, date=day)[0], "run_id": str(i)} for i in range(30) for day in days]
    emitted = [ref for row in rows for ref in fn.process(row)] + _finished(fn)
    assert len(emitted) == len(days), "one reference per partition"
    assert len({ref_spans(ref)[0] for _, ref in emitted}) == 1
    assert max(len(ref_spans(ref)[1]) for _, ref in emitted) > 1, "several chunks per partition in the shard"
    for (_, _, day), ref in emitted:
        assert sorted(int(r["run_id"]) for r in read_chunks(str(tmp_path), "runs", [ref])) == list(range(30))
        assert {r["date"] for r in read_chunks(str(tmp_path), "runs", [ref])} == {day}


def test_a_reference_packs_its_shard_and_spans() -> None:
    shard = bytes(range(16))
    spans = [(0, 1), (1, 2**40), (2**63, 7)]
    ref = chunk_ref(shard, spans)
    assert len(ref) == 16 + 16 * len(spans)
    assert ref_spans(ref) == (shard, spans)
    assert ref_spans(chunk_ref(shard, [])) == (shard, [])


def test_a_quiet_tables_rows_do_not_wait_for_the_whole_fleet(tmp_path: Path) -> None:
    """The bound is per process, not per table: a table with a row every ten runs is packed and
    written while a busy table's rows keep coming, and its references leave with its next row."""
    busy, quiet = _started("grader_results", tmp_path, rows=64, packed=4096), _started("dead_letter", tmp_path, 64, 4096)
    assert busy.budget is quiet.budget
    out: dict[str, list[tuple[PartitionKey, ChunkRef]]] = {"grader_results": [], "dead_letter": []}
    quiet_rows = []
    for run in range(1500):
        day = f"2026-05-{1 + run % 28:02d}"
        for grader in range(4):
            out["grader_results"] += busy.process({"workflow": "wf", "date": day, "run_id": str(run), "g": grader})
        if run % 10 == 0:
            quiet_rows.append({"workflow": "wf", "date": day, "run_id": str(run), "error": "x" * 50})
            out["dead_letter"] += quiet.process(quiet_rows[-1])
        budget = busy.budget
        assert budget.rows == busy.held.pending_rows + quiet.held.pending_rows <= 64
        assert budget.bytes == busy.held.size + quiet.held.size <= 4096
        assert quiet.held.size <= 4096, "the quiet table's chunks do not pile up"
    assert out["dead_letter"], "the quiet table's chunks were written while the bundle ran"
    out["grader_results"] += _finished(busy)
    out["dead_letter"] += _finished(quiet)
    assert busy.budget.holders == [] and busy.budget.rows == 0 and busy.budget.bytes == 0
    assert sorted(r["run_id"] for r in _read(tmp_path, "dead_letter", out["dead_letter"])) == sorted(
        r["run_id"] for r in quiet_rows)
    assert len(list(_read(tmp_path, "grader_results", out["grader_results"]))) == 1500 * 4


def test_a_bundle_that_never_finished_stops_counting(tmp_path: Path) -> None:
    fn = _started("runs", tmp_path)
    for row in _rows(10):
        list(fn.process(row))
    assert fn.budget.rows == 10
    fn.start_bundle()  # the failed bundle's DoFn reused: its rows are gone with the bundle
    assert fn.budget.rows == 0 and len(fn.budget.holders) == 1
    fn.teardown()
    assert fn.budget.holders == [] and fn.budget.rows == 0


def test_bounds_make_separate_budgets() -> None:
    assert process_budget(10, 100) is process_budget(10, 100)
    assert process_budget(10, 100) is not process_budget(10, 101)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    stream=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 5)), max_size=300),
    rows_bound=st.integers(1, 80),
    packed_bound=st.integers(1, 3000),
)
def test_any_interleaving_stages_every_row_once_within_the_bounds(
    tmp_path_factory: pytest.TempPathFactory, stream: list[tuple[int, int]], rows_bound: int, packed_bound: int,
) -> None:
    """Rows of three tables over six partitions, in any order and under any bounds: every row is
    read back once, from its own partition's references, and the budget's counts stay exact."""
    root = tmp_path_factory.mktemp("staging")
    staging._BUDGETS.clear()
    tables = ["a", "b", "c"]
    fns = [_started(t, root, rows_bound, packed_bound) for t in tables]
    budget = fns[0].budget
    out: list[list[tuple[PartitionKey, ChunkRef]]] = [[] for _ in tables]
    sent: list[list[tuple[str, str]]] = [[] for _ in tables]
    for i, (t, part) in enumerate(stream):
        row = {"workflow": f"w{part % 2}", "date": f"2026-01-0{1 + part // 2}", "i": i}
        sent[t].append((str((row["workflow"], row["date"])), str(i)))
        out[t] += fns[t].process(row)
        assert budget.rows == sum(f.held.pending_rows for f in fns) <= rows_bound
        assert budget.bytes == sum(f.held.size for f in fns) <= packed_bound
    for t, fn in enumerate(fns):
        out[t] += _finished(fn)
        got = []
        for (table, workflow, date), ref in out[t]:
            assert table == tables[t]
            got += [(str((workflow, date)), str(r["i"])) for r in read_chunks(str(root), table, [ref])
                    if (r["workflow"], r["date"]) == (workflow, date)]
        assert sorted(got) == sorted(sent[t])
        assert sum(1 for _ in _read(root, tables[t], out[t])) == len(sent[t]), "no row read twice"
    assert budget.holders == [] and budget.rows == 0 and budget.bytes == 0
