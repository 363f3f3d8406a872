"""`fleetgrade run` and `fleetgrade trace` on a folder mixing agent session / trace formats with
gh-aw runs (issue 31): every session a `runs` row with its format as `source_kind`, every file
no reader recognises a dead letter naming it, inputs = graded + dead-lettered."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.tables import connect
from tests.conftest import REPO
from tests.graders.formats.test_readers import AGENT, HOOK, SESSION, _lines, _span, otlp

FLEETGRADE = str(Path(sys.executable).parent / "fleetgrade")
REAL = REPO / "tests" / "data" / "real"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FLEETGRADE_SHARED": os.environ.get("FLEETGRADE_SHARED", "/work/shared")}
    return subprocess.run([FLEETGRADE, *args], capture_output=True, text=True, timeout=300, cwd=REPO, env=env)


def make_mixed(root: Path) -> Path:
    fleet = root / "fleet"
    claude = fleet / "claude-agent"
    shutil.copytree(REAL / "claude_code" / "spotter-session-with-subagents", claude)
    (fleet / "copilot-agent").mkdir(parents=True)
    shutil.copy(REAL / "gh_aw_logs/ghaw-copilot-routed-gpt-responses/agent-session.jsonl",
                fleet / "copilot-agent" / "events.jsonl")
    (fleet / "hooks").mkdir()
    (fleet / "hooks" / "audit.jsonl").write_bytes(_lines(*HOOK))
    (fleet / "otel").mkdir()
    (fleet / "otel" / "trace.json").write_bytes(otlp(
        _span("a", None, "invoke_agent triage", 1793000000, AGENT),
        _span("t1", "a", "execute_tool get_issue", 1793000002, {"gen_ai.operation.name": "execute_tool",
                                                                  "gen_ai.tool.name": "get_issue"}),
        _span("t2", "a", "execute_tool add_label", 1793000003, {"gen_ai.operation.name": "execute_tool",
                                                                  "gen_ai.tool.name": "add_label"},
              {"code": 2, "message": "forbidden"}),
    ))
    (fleet / "garbage.jsonl").write_bytes(b"not json at all\n\x00\xff")
    (fleet / "README.md").write_text("not an input: no session format uses .md")
    # A JSON document no reader recognises (`gh aw logs --json`'s summary) is a stray, not a dead letter.
    (fleet / "summary.json").write_text('{"summary": {"total_runs": 1}, "runs": [{"database_id": 7100213}]}')
    # A gh-aw run beside them, in a <workflow>/<id>/ folder, with a loose .json of its own: that
    # file stays the run's stray (as before), it is no session file.
    run = fleet / "gh" / "daily-file-diet" / "7100213"
    shutil.copytree(REPO / "examples/fleet/daily-file-diet/run-7100213", run)
    (run / "detection").mkdir()
    (run / "detection" / "detection_result.json").write_text('{"conclusion": "success"}')
    return fleet


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    root = tmp_path_factory.mktemp("mixed")
    fleet = make_mixed(root)
    out = root / "out"
    return fleet, out, _run("run", "--input", str(fleet), "--output", str(out))


def test_each_session_is_a_run_of_its_format(graded: tuple[Path, Path, subprocess.CompletedProcess[str]]) -> None:
    fleet, out, done = graded
    assert done.returncode == 0, done.stderr[-3000:]
    con = connect(str(out))
    rows = con.execute("SELECT root, source_kind, tool_calls, workflow, run_id, metadata_source FROM runs").fetchall()
    got = {(r[0][len(str(fleet)) + 1:], r[4]): (r[1], r[2], r[3], r[5]) for r in rows}
    gh_calls = got[("gh/daily-file-diet/7100213", "7100213")][1]
    assert got == {
        (f"claude-agent/{SESSION}.jsonl", SESSION): ("claude-code", 24, "claude-agent", "layout"),
        ("copilot-agent/events.jsonl", "70d39a99-d463-4864-83a9-959f20c1feb7"): (
            "copilot-cli", 0, "copilot-agent", "layout"),
        # One file, two sessions; s1's Pre/Post records are one call each.
        ("hooks/audit.jsonl", "s1"): ("hook-log", 2, "hooks", "layout"),
        ("hooks/audit.jsonl", "s2"): ("hook-log", 1, "hooks", "layout"),
        ("otel/trace.json", "c-7"): ("otel-genai", 2, "triage", "file"),
        ("gh/daily-file-diet/7100213", "7100213"): ("gh-aw", gh_calls, "daily-file-diet", "aw_info"),
    }


def test_failures_in_session_files_are_graded(graded: tuple[Path, Path, subprocess.CompletedProcess[str]]) -> None:
    _, out, _ = graded
    con = connect(str(out))
    failures = dict(con.execute(
        "SELECT run_id, value FROM grader_results WHERE grader_id = 'tool-failure-count' "
        "AND run_id IN ('s1', 'c-7')").fetchall())
    assert failures == {"s1": 1, "c-7": 1}
    verdicts = dict(con.execute("SELECT run_id, step_count FROM trace_verdicts WHERE run_id = ?", [SESSION]).fetchall())
    assert verdicts == {SESSION: 24}  # the subagent's 12 steps are attributed, not dropped


def test_garbage_is_a_dead_letter_and_the_count_is_whole(
        graded: tuple[Path, Path, subprocess.CompletedProcess[str]]) -> None:
    fleet, out, done = graded
    con = connect(str(out))
    dead = con.execute("SELECT input, message FROM dead_letter").fetchall()
    assert [d[0] for d in dead] == [str(fleet / "garbage.jsonl")]
    assert "not a recognised agent session or trace format" in dead[0][1]
    m = re.search(r"(\d+) run\(s\) discovered: (\d+) graded, (\d+) dead-lettered", done.stderr)
    assert m is not None, done.stderr[-2000:]
    runs = con.execute("SELECT count(*) FROM runs").fetchone()[0]
    assert (int(m[1]), int(m[2]), int(m[3])) == (runs + 1, runs, 1) == (7, 6, 1)
    # README.md, summary.json and the gh-aw run's detection/detection_result.json
    assert "; 3 stray file(s) skipped;" in done.stderr


def test_trace_reads_the_same_folder(graded: tuple[Path, Path, subprocess.CompletedProcess[str]]) -> None:
    fleet, _, _ = graded
    done = _run("trace", "--input", str(fleet), "--json")
    report = json.loads(done.stdout)
    steps = {r["run_id"]: r["step_count"] for r in report["runs"]}
    assert steps[SESSION] == 24 and steps["s1"] == 2 and steps["c-7"] == 2
    assert "garbage.jsonl: not a recognised agent session or trace format" in done.stderr


def test_trace_input_of_an_unrecognised_file_is_one_line_and_exit_1(tmp_path: Path) -> None:
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"hello": 1}\n')
    done = _run("trace", "--input", str(bad))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"fleetgrade trace: error: {bad}: not a recognised agent session or trace format "
        "(tried agy, aw-session, claude-code, claude-stream-json, codex-exec, codex-rollout, copilot-cli, "
        "gemini-chat, gemini-stream-json, goose, hook-log, opencode, otel-genai, pi)"]


def test_a_folder_of_json_documents_only_holds_no_run(tmp_path: Path) -> None:
    (tmp_path / "fleet").mkdir()
    (tmp_path / "fleet" / "summary.json").write_text('{"summary": {"total_runs": 0}, "runs": []}')
    done = _run("run", "--input", str(tmp_path / "fleet"), "--output", str(tmp_path / "out"))
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "--input holds no run folder" in done.stderr
