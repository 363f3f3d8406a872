"""One identity, one owner, across input kinds (issue 40), through the `fleetgrade` executable.

A gh-aw run folder and a session file whose records claim the same (workflow, run id, attempt)
are the duplicate case two folders are: both dead letters naming each other, on the first job or
any rerun, never a silent replacement; a copy of a run graded earlier is a dead letter and the
run keeps its grades. The incremental state keys each session by its own file, so an unchanged
rerun of a folder of sessions grades nothing and changes no file, and a rerun never counts a
replaced run as unchanged.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import REPO

FLEETGRADE = str(Path(sys.executable).parent / "fleetgrade")
SUMMARY = re.compile(r"(\d+) run\(s\) discovered: (\d+) graded, (\d+) dead-lettered, (\d+) unchanged, (\d+) outside")

pytestmark = pytest.mark.slow


def run(fleet: Path, out: Path, *flags: str) -> tuple[int, int, int, int, int]:
    env = {**os.environ, "FLEETGRADE_SHARED": os.environ.get("FLEETGRADE_SHARED", "/work/shared")}
    done = subprocess.run([FLEETGRADE, "run", "--input", str(fleet), "--output", str(out), *flags],
                          capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    found = SUMMARY.search(done.stderr)
    assert found is not None, done.stderr[-2000:]
    discovered, graded, dead, unchanged, outside = map(int, found.groups())
    assert discovered == graded + dead + unchanged + outside, found.group(0)
    return discovered, graded, dead, unchanged, outside


def gh_aw_run(folder: Path, run_id: int, failed: bool = True) -> Path:
    """A run folder whose one tool call failed: tool-success-rate 0.0."""
    (folder / "mcp-logs").mkdir(parents=True)
    (folder / "aw_info.json").write_text(json.dumps({"workflow_name": folder.parent.name, "run_id": run_id,
                                                     "run_attempt": 1, "created_at": "2026-11-02T10:00:00Z"}))
    (folder / "agent_output.json").write_text('{"items": []}')
    status = {"status": "error", "error": "boom"} if failed else {}
    (folder / "mcp-logs" / "gateway.jsonl").write_text(json.dumps({"type": "tool_call", "tool_name": "a", **status}))
    return folder


def hook_log(path: Path, session: str, tool: str = "Read") -> Path:
    """A hook audit log of one session whose one call succeeded: tool-success-rate 1.0. Its
    workflow is the folder holding it, its run id the session id."""
    path.parent.mkdir(parents=True, exist_ok=True)
    records = [{"ts": "2026-11-02T10:00:00Z", "session_id": session, "hook": "PreToolUse", "tool": tool,
                "command": "src/a.py", "exit_code": ""},
               {"ts": "2026-11-02T10:00:01Z", "session_id": session, "hook": "PostToolUse", "tool": tool,
                "command": "src/a.py", "exit_code": 0}]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def rows(out: Path, table: str) -> list[dict]:
    return [r for p in sorted((out / table).rglob("*.parquet")) for r in pq.read_table(p).to_pylist()]


def files(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))
            if p.is_file()}


def success_rate(out: Path) -> list[float]:
    return [r["value"] for r in rows(out, "grader_results") if r["grader_id"] == "tool-success-rate"]


def test_a_run_folder_and_a_session_claiming_it_are_both_dead_letters_on_every_job(tmp_path):
    fleet, out = tmp_path / "fleet", tmp_path / "out"
    folder = gh_aw_run(fleet / "wf" / "run-5", 5)
    session = hook_log(fleet / "wf" / "audit.jsonl", "5")
    assert run(fleet, out) == (2, 0, 2, 0, 0)
    dead = {r["input"]: r for r in rows(out, "dead_letter")}
    assert set(dead) == {str(folder), str(session)}
    for row in dead.values():
        assert row["error_class"] == "ConflictingRuns" and row["stage"] == "duplicate"
        assert str(folder) in row["message"] and str(session) in row["message"]
    assert rows(out, "runs") == []
    before = files(out)
    assert run(fleet, out) == (2, 0, 2, 0, 0)  # decided again (its rival may be gone), nothing rewritten
    assert files(out) == before
    session.unlink()  # one remains: it is graded
    assert run(fleet, out)[1] == 1
    assert [r["root"] for r in rows(out, "runs")] == [str(folder)] and success_rate(out) == [0.0]


def test_a_session_claiming_a_run_graded_earlier_never_replaces_it(tmp_path):
    """The case of the issue: the first job keeps both, the rerun wiped the run (no runs row, no
    dead letter, counted unchanged) and its grades became the impostor's (1.0 for 0.0)."""
    fleet, out = tmp_path / "fleet", tmp_path / "out"
    folder = gh_aw_run(fleet / "wf" / "run-5", 5)
    assert run(fleet, out) == (1, 1, 0, 0, 0)
    session = hook_log(fleet / "wf" / "audit.jsonl", "5")
    for _ in range(2):  # the job that meets it, then an unchanged rerun
        assert run(fleet, out) == (2, 0, 1, 1, 0)
        assert [r["root"] for r in rows(out, "runs")] == [str(folder)] and success_rate(out) == [0.0]
        [dead] = rows(out, "dead_letter")
        assert dead["input"] == str(session) and dead["error_class"] == "ConflictingRuns"
        assert f"{folder} keep their grades from an earlier job" in dead["message"]


def test_a_run_folder_claiming_a_session_graded_earlier_is_the_dead_letter(tmp_path):
    fleet, out = tmp_path / "fleet", tmp_path / "out"
    session = hook_log(fleet / "wf" / "audit.jsonl", "5")
    assert run(fleet, out) == (1, 1, 0, 0, 0)
    folder = gh_aw_run(fleet / "wf" / "run-5", 5)
    assert run(fleet, out) == (2, 0, 1, 1, 0)
    assert [r["root"] for r in rows(out, "runs")] == [str(session)] and success_rate(out) == [1.0]
    assert [r["input"] for r in rows(out, "dead_letter")] == [str(folder)]


def test_byte_identical_session_copies_are_graded_once(tmp_path):
    """An OTLP trace names its workflow and run itself: two copies in two folders are one run."""
    from tests.graders.formats.test_readers import AGENT, _span, otlp

    fleet, out = tmp_path / "fleet", tmp_path / "out"
    trace = otlp(_span("a", None, "invoke_agent triage", 1793000000, AGENT),
                 _span("t1", "a", "execute_tool get_issue", 1793000002, {"gen_ai.operation.name": "execute_tool",
                                                                          "gen_ai.tool.name": "get_issue"}))
    for folder in ("a", "b"):
        (fleet / folder).mkdir(parents=True)
        (fleet / folder / "trace.json").write_bytes(trace)
    assert run(fleet, out) == (2, 1, 1, 0, 0)
    assert [r["root"] for r in rows(out, "runs")] == [str(fleet / "a" / "trace.json")]
    [dead] = rows(out, "dead_letter")
    assert dead["input"] == str(fleet / "b" / "trace.json") and dead["error_class"] == "DuplicateRun"


def test_sessions_are_keyed_by_their_own_file(tmp_path):
    """An unchanged rerun of a folder of sessions grades nothing and changes no file; a changed
    file regrades the folder, a session gone from it takes its rows along, and the folder is
    unchanged again on the next job; a file removed keeps its rows, as a removed run folder does."""
    fleet, out = tmp_path / "fleet", tmp_path / "out"
    hook_log(fleet / "team" / "one.jsonl", "s1")
    two = hook_log(fleet / "team" / "two.jsonl", "s2")
    assert run(fleet, out) == (2, 2, 0, 0, 0)
    before = files(out)
    assert run(fleet, out) == (2, 0, 0, 2, 0)
    assert files(out) == before
    state = [r["root"] for r in rows(out, "_state")]
    assert sorted(state) == [str(fleet / "team" / "one.jsonl"), str(two)]  # one row each, never doubled
    hook_log(two, "s9")  # the session in two.jsonl is now another run
    assert run(fleet, out) == (2, 2, 0, 0, 0)
    assert sorted(r["run_id"] for r in rows(out, "runs")) == ["s1", "s9"]
    assert sorted(r["root"] for r in rows(out, "_state")) == sorted(state)
    changed = files(out)
    assert run(fleet, out) == (2, 0, 0, 2, 0)  # the changed folder, once regraded, is unchanged again
    assert files(out) == changed
    (fleet / "team" / "one.jsonl").unlink()  # a file gone keeps its rows (history), as a gone run folder does
    run(fleet, out)
    assert sorted(r["run_id"] for r in rows(out, "runs")) == ["s1", "s9"]
    assert sorted(r["root"] for r in rows(out, "_state")) == sorted(state)  # never doubled
    gone = files(out)
    assert run(fleet, out)[1] == 0
    assert files(out) == gone
