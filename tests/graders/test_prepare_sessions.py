"""A folder's session files → prepared runs (graders/prepare_sessions.py)."""

from __future__ import annotations

from pathlib import Path
from unittest.mock import patch

from graders.families.trace_rules.config import default_config
from graders.one_run import verdict_row
from graders.prepare import PreparedRun
from graders.prepare_sessions import NotASession, SessionFailure, prepare_sessions
from graders.runs.runfiles import local_run_files
from tests.graders.formats.test_readers import AGENT, HOOK, _lines, _span, otlp


def test_each_file_has_its_own_read_budget(tmp_path: Path) -> None:
    for name in ("a.jsonl", "b.jsonl", "c.jsonl"):
        (tmp_path / name).write_bytes(_lines(*HOOK))
    size = len(_lines(*HOOK))
    # A budget that holds one file, not the folder's three.
    with patch("graders.runs.runfiles.MAX_RUN_BYTES", int(size * 1.5)):
        out = list(prepare_sessions(local_run_files(tmp_path), "wf/2026-11-02"))
    assert all(isinstance(o, PreparedRun) for o in out), out
    assert [(o.meta.root.rsplit("/", 1)[-1], o.meta.run_id) for o in out if isinstance(o, PreparedRun)] == [
        ("a.jsonl", "s1"), ("a.jsonl", "s2"), ("b.jsonl", "s1"), ("b.jsonl", "s2"), ("c.jsonl", "s1"), ("c.jsonl", "s2")]


def test_identity_from_the_folder_and_a_failure_per_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "ok.jsonl").write_bytes(_lines({"session_id": "x", "hook": "PostToolUse", "tool": "Read"}))
    (tmp_path / "bad.jsonl").write_text("[1, 2]")
    (tmp_path / "manifest.json").write_text('{"runs": 3}')
    out = list(prepare_sessions(local_run_files(tmp_path), "fleet/hooks-wf/2026-11-05"))
    failures = [o for o in out if isinstance(o, SessionFailure)]
    (run,) = [o for o in out if isinstance(o, PreparedRun)]
    # No timestamp in the file: the date folder above it; the workflow is the folder holding it.
    assert (run.meta.workflow, run.meta.run_id, run.meta.date, run.meta.metadata_source) == (
        "hooks-wf", "x", "2026-11-05", "layout")
    assert run.source_kind == "hook-log" and run.steps_run is not None and len(run.steps_run.steps) == 1
    assert [f.path.rsplit("/", 1)[-1] for f in failures] == ["bad.jsonl"]
    # A JSON document no reader recognises is no session and no failure: a stray.
    assert [o.path.rsplit("/", 1)[-1] for o in out if isinstance(o, NotASession)] == ["manifest.json"]
    assert "not a recognised agent session or trace format" in str(failures[0].error)


def test_a_session_verdict_comes_from_its_readers_steps(tmp_path: Path) -> None:
    # An agent span with status ERROR: its reader says not delivered; the gh-aw-shaped trace cannot
    # say it (no agent output), so the verdict must come from the reader's run, not from the trace.
    (tmp_path / "trace.json").write_bytes(otlp(
        _span("a", None, "invoke_agent x", 1793000000, AGENT, {"code": "STATUS_CODE_ERROR"}),
        _span("t", "a", "execute_tool y", 1793000001, {"gen_ai.operation.name": "execute_tool",
                                                         "gen_ai.tool.name": "y"})))
    (run,) = prepare_sessions(local_run_files(tmp_path), "fleet/otel/2026-11-05")
    assert isinstance(run, PreparedRun) and run.source_kind == "otel-genai"
    row = verdict_row(run, default_config())
    assert (row["delivered"], row["verdict"], row["step_count"]) == (False, "fail", 1)
