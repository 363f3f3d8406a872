"""The sink stages rows as packed chunks in shard files and shuffles only their references."""

from __future__ import annotations

from pathlib import Path
from unittest.mock import patch

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from tests.helpers.beam import local_test_pipeline
from transforms import sink
from transforms.sink import (
    _PENDING_ROWS,
    PART_NAME,
    STAGING,
    StageRows,
    chunk_ref,
    commit,
    read_chunks,
    ref_spans,
)


def _rows(n: int, workflow: str = "wf-a", date: str = "2026-05-01") -> list[dict[str, object]]:
    return [{"workflow": workflow, "date": date, "run_id": str(i), "attempt": 1} for i in range(n)]


def test_stage_rows_writes_chunks_before_the_bundle_ends(tmp_path: Path) -> None:
    """A bundle holding the whole fleet (the local runner's) must not keep its rows until finish_bundle."""
    fn = StageRows("runs", str(tmp_path), shard_bytes=1)
    fn.start_bundle()
    rows = _rows(64)
    emitted = [ref for row in rows for ref in fn.process(row)]
    assert emitted, "a full chunk is written and referenced while the bundle is still running"
    assert {key for key, _ in emitted} == {("runs", "wf-a", "2026-05-01")}
    assert list(read_chunks(str(tmp_path), "runs", (ref for _, ref in emitted))) == rows
    assert fn.pending == {} and fn.chunks == []
    assert list(fn.finish_bundle()) == []


def test_staged_rows_read_back_per_partition(tmp_path: Path) -> None:
    rows = _rows(150) + _rows(70, "wf-b") + _rows(3, "wf-b", "2026-05-02")
    with local_test_pipeline() as p:
        got = (
            p
            | beam.Create(rows)
            | beam.ParDo(StageRows("runs", str(tmp_path), shard_bytes=2000))
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
    fn = StageRows("runs", str(tmp_path), shard_bytes=1)
    fn.start_bundle()
    days = [f"2026-{1 + d // 28:02d}-{1 + d % 28:02d}" for d in range(_PENDING_ROWS // 2 + 1)]
    rows = [row for day in days for row in _rows(2, date=day)]  # 2 rows per partition, far below a chunk
    emitted = []
    for row in rows:
        emitted += fn.process(row)
        assert fn.pending_rows < _PENDING_ROWS
        assert sum(map(len, fn.pending.values())) == fn.pending_rows
    emitted += [wv.value for wv in fn.finish_bundle()]
    assert len({key for key, _ in emitted}) == len(days)
    got = sorted((r["date"], r["run_id"]) for r in read_chunks(str(tmp_path), "runs", (ref for _, ref in emitted)))
    assert got == sorted((r["date"], r["run_id"]) for r in rows)


def test_one_reference_per_partition_and_shard(tmp_path: Path) -> None:
    """Chunks of one partition in one shard file travel as one reference: with a long history a
    chunk holds a few rows, and a reference per chunk made the shuffle grow with the rows."""
    fn = StageRows("runs", str(tmp_path), shard_bytes=1 << 30)  # one shard for the whole bundle
    fn.start_bundle()
    days = [f"2026-{1 + d // 28:02d}-{1 + d % 28:02d}" for d in range(100)]
    # Rows spread over 100 partitions: each pending flush packs a chunk of ~10 rows per partition.
    rows = [{**_rows(1, date=day)[0], "run_id": str(i)} for i in range(30) for day in days]
    emitted = [ref for row in rows for ref in fn.process(row)] + [wv.value for wv in fn.finish_bundle()]
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


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_commit_moves_staged_files_drops_older_writers_files_and_lists_each_table_once(tmp_path: Path) -> None:
    out, staging = tmp_path / "out", tmp_path / "out" / STAGING / "job"
    old_part = "runs/workflow=wf-a/date=2026-05-01"
    (out / old_part).mkdir(parents=True)
    (out / old_part / PART_NAME).write_bytes(b"old")
    (out / old_part / "part-00001-of-00002.parquet").write_bytes(b"older writer")
    (out / "runs/workflow=wf-b/date=2026-05-01").mkdir(parents=True)
    (out / "runs/workflow=wf-b/date=2026-05-01" / PART_NAME).write_bytes(b"emptied")
    untouched = "grader_results/workflow=wf-a/date=2026-04-30/extra.parquet"
    (out / untouched).parent.mkdir(parents=True)
    (out / untouched).write_bytes(b"not in a written partition")
    writes = [f"{old_part}/{PART_NAME}", f"runs/workflow=wf-c/date=2026-05-02/{PART_NAME}",
              f"grader_results/workflow=wf-a/date=2026-05-01/{PART_NAME}"]
    for rel in writes:
        (staging / rel).parent.mkdir(parents=True, exist_ok=True)
        (staging / rel).write_bytes(b"new " + rel.encode())
    actions = [("write", rel) for rel in writes] + [("delete", f"runs/workflow=wf-b/date=2026-05-01/{PART_NAME}")]

    listed: list[str] = []
    files_under = sink._files_under
    with patch.object(sink, "_files_under", side_effect=lambda root: listed.append(root) or files_under(root)):
        committed = commit(None, actions, str(out), str(staging), ["runs", "grader_results"])

    assert sorted(committed) == sorted(rel for _, rel in actions)
    assert sorted(listed) == sorted([str(out / "grader_results"), str(out / "runs"), str(out / STAGING)])
    assert _files(out) == {*writes, untouched}
    for rel in writes:
        assert (out / rel).read_bytes() == b"new " + rel.encode()
    # A retried commit (its staged files already moved) changes nothing.
    assert commit(None, actions, str(out), str(staging), ["runs", "grader_results"]) == []
    assert _files(out) == {*writes, untouched}
