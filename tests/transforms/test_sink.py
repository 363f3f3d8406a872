"""The sink's commit: staged partition files moved into place (staging itself: test_staging.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from unittest.mock import patch

from graders.tables.paths import PART_NAME
from transforms import sink
from transforms.sink import STAGING, commit


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
    # One listing per table; a local staging folder is removed without one (delete_tree).
    assert sorted(listed) == sorted([str(out / "grader_results"), str(out / "runs")])
    assert _files(out) == {*writes, untouched}
    for rel in writes:
        assert (out / rel).read_bytes() == b"new " + rel.encode()
    # A retried commit (its staged files already moved) changes nothing.
    assert commit(None, actions, str(out), str(staging), ["runs", "grader_results"]) == []
    assert _files(out) == {*writes, untouched}


def test_a_commit_whose_staging_is_gone_moves_nothing(tmp_path: Path) -> None:
    """Staging removed under a job (its lock lost): the commit fails before the first move."""
    out, staging = tmp_path / "out", tmp_path / "out" / STAGING / "job"
    present, missing = f"runs/workflow=a/date=2026-05-01/{PART_NAME}", f"runs/workflow=b/date=2026-05-01/{PART_NAME}"
    (staging / present).parent.mkdir(parents=True)
    (staging / present).write_bytes(b"new")
    try:
        commit(None, [("write", present), ("write", missing)], str(out), str(staging), ["runs"])
    except FileNotFoundError as exc:
        assert missing in str(exc)
    else:
        raise AssertionError("committed without its staged file")
    assert _files(out) == {f"{STAGING}/job/{present}"}


def test_a_job_s_staging_is_removed_while_the_lock_heartbeat_writes_its_owner_record(tmp_path: Path) -> None:
    # The heartbeat rewrites _staging/<job>/_owner… every beat; a beat landing inside the commit's
    # removal made rmtree fail (ENOTEMPTY) after every partition had moved: exit 1, a traceback.
    staging = tmp_path / STAGING / "job"
    (staging / "_shards").mkdir(parents=True)
    (staging / "_shards" / "grader_stats-0").write_bytes(b"x")
    real_rmdir = os.rmdir

    def rmdir(path: Any, *args: Any, **kwargs: Any) -> None:
        if os.fspath(path) == str(staging):
            (staging / "owner").write_bytes(b"beat")  # the beat, between rmtree's listing and its rmdir
        real_rmdir(path, *args, **kwargs)

    with patch("os.rmdir", rmdir):
        sink.delete_tree(str(staging))
    assert not (staging / "_shards").exists()
