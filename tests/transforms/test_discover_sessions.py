"""Discovery of session files beside gh-aw runs (graders/runs/layout.py ``session_root_of``): each folder's
session files are one element, a Claude Code session's ``subagents/`` files with it; a file in a
gh-aw run's folder stays that run's stray; ``list_run`` lists each element as discovery did."""

from __future__ import annotations

from pathlib import Path

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from graders.runs.layout import session_root_of
from tests.helpers.beam import local_test_pipeline
from transforms.discover import DiscoverRuns, ListRuns, list_run
from transforms.progress import Tally

FILES = {
    "top.jsonl": "{}",
    "claude/s1.jsonl": "{}",
    "claude/s1/subagents/agent-a1.jsonl": "{}",
    "claude/notes.md": "not a session format",
    "claude/run-5/aw_info.json": '{"workflow_name": "w", "run_id": 5}',
    "claude/run-5/extra.jsonl": "{}",  # inside a run-<id> folder: the run's
    "gh/wf/7/aw_info.json": '{"workflow_name": "wf", "run_id": 7}',
    "gh/wf/7/detection/detection_result.json": "{}",  # a stray of run 7, as before
    "otel/2026-11-01/trace.json": "{}",
}
EXPECTED = {
    "": ["top.jsonl"],
    "claude": ["s1.jsonl", "s1/subagents/agent-a1.jsonl"],
    "claude/run-5": ["aw_info.json", "extra.jsonl"],
    "gh/wf/7": ["aw_info.json"],
    "otel/2026-11-01": ["trace.json"],
}


def _fleet(root: Path) -> None:
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_session_root_of() -> None:
    assert session_root_of("a/b.jsonl") == "a" and session_root_of("b.ndjson") == ""
    assert session_root_of("a/s/subagents/agent-x.jsonl") == "a"
    assert session_root_of("s/subagents/agent-x.jsonl") == ""
    assert session_root_of("a/README.md") is None


def test_session_files_are_grouped_by_folder(tmp_path: Path) -> None:
    _fleet(tmp_path)
    with local_test_pipeline() as p:
        runs = p | DiscoverRuns(str(tmp_path)) | beam.Map(lambda kv: (kv[0], [e[0] for e in kv[1]]))
        assert_that(runs, equal_to(list(EXPECTED.items())))


def test_list_run_lists_each_element_as_discovery_did(tmp_path: Path) -> None:
    _fleet(tmp_path)
    discovered = dict(ListRuns().discover(str(tmp_path), Tally("test")))
    assert {root: [e[0] for e in listing] for root, listing in discovered.items()} == EXPECTED
    for root, listing in discovered.items():
        assert list_run(str(tmp_path), root) == listing, root
