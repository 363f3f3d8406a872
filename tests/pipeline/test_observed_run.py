"""`fleetgrade run` on a fleet with a failed run: observed grades, the trace verdict and grader_drift.

The fleet is synthetic (no licensed real run with these files exists, docs/formats.md §7): run 5001
is the issue's failed run (agent exit 1, ``conclusion: failure``, GitHub MCP calls answered 403,
create_pull_request calls that errored); run 5002 carries gh-aw's archived grades equal to
fleetgrade's; run 5003's archive differs on one grader.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from graders.families.observed import observed_plan
from graders.grading.engine import results_document
from graders.grading.plan import PlanSet, default_plan
from graders.one_run import RunGrader
from graders.prepare import prepare_run
from graders.runs.runfiles import local_run_files
from pipeline.tables import connect
from tests.graders.test_evidence import RPC_403, RUN_SUMMARY_FAILED, STDIO_FAILED, jsonl

FLEETGRADE = str(Path(sys.executable).parent / "fleetgrade")
TOKENS = jsonl(
    {"event": "token_usage", "purpose": "routing_classification", "model": "gpt-5.6-luna", "input_tokens": 900,
     "output_tokens": 20, "cache_read_tokens": 0, "cache_write_tokens": 0, "duration_ms": 300},
    {"event": "token_usage", "purpose": "", "model": "claude-opus-5", "input_tokens": 2, "output_tokens": 200,
     "cache_read_tokens": 0, "cache_write_tokens": 30000, "duration_ms": 4000},
    {"event": "token_usage", "purpose": "", "model": "claude-opus-5", "input_tokens": 2, "output_tokens": 300,
     "cache_read_tokens": 30000, "cache_write_tokens": 4000, "duration_ms": 5000},
)


def write_run(root: Path, run_id: int, files: dict[str, bytes]) -> Path:
    run = root / "pr-fixer" / f"run-{run_id}"
    info = {"workflow_name": "pr-fixer", "run_id": run_id, "run_attempt": "1", "created_at": "2026-11-30T08:00:00Z",
            "repository": "octo-org/widgets", "engine_id": "copilot"}
    base = {"aw_info.json": json.dumps(info).encode(),
            "agent_output.json": b'{"items": [{"type": "create_pull_request", "title": "fix"}], "errors": []}',
            "sandbox/firewall/logs/api-proxy-logs/token-usage.jsonl": TOKENS}
    for rel, data in {**base, **files}.items():
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_bytes(data)
    return run


def archive(run: Path, change: str | None = None) -> None:
    """gh-aw's grader_results.json for the run, as fleetgrade grades it (one value changed)."""
    results = RunGrader(PlanSet(default_plan())).grade(prepare_run(local_run_files(run), str(run))).results
    if change is not None:
        hit = next(r for r in results if r["id"] == change)
        hit["value"], hit["status"] = 0.25, "fail"
    (run / "agent/graders").mkdir(parents=True)
    (run / "agent/graders/grader_results.json").write_text(json.dumps(results_document(results, str(run.name))))


@pytest.fixture(scope="module")
def output(tmp_path_factory: pytest.TempPathFactory) -> Path:
    fleet = tmp_path_factory.mktemp("observed") / "fleet"
    ok_rpc = jsonl(*[json.loads(line) for line in RPC_403.splitlines()[:4]])
    write_run(fleet, 5001, {"mcp-logs/rpc-messages.jsonl": RPC_403, "agent-stdio.log": STDIO_FAILED,
                            "run_summary.json": RUN_SUMMARY_FAILED})
    for run_id, change in ((5002, None), (5003, "tool-success-rate")):
        run = write_run(fleet, run_id, {"mcp-logs/rpc-messages.jsonl": ok_rpc,
                                        "agent-stdio.log": b"Process exiting with code: 0\n",
                                        "run_summary.json": b'{"run": {"conclusion": "success"}}'})
        archive(run, change)
    out = fleet.parent / "out"
    proc = subprocess.run([FLEETGRADE, "run", "--input", str(fleet), "--output", str(out), "--log-level", "WARNING"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return out


def test_the_failed_run_fails_its_conclusion_and_counts_its_mcp_errors(output: Path) -> None:
    con = connect(str(output))
    got = dict(con.execute("""SELECT run_id || '/' || grader_id, value FROM grader_results
                              WHERE source = 'fleetgrade' AND grader_id IN ('run-conclusion', 'mcp-tool-error-count',
                              'safe-output-error-count')""").fetchall())
    assert got == {"5001/run-conclusion": 0.0, "5001/mcp-tool-error-count": 4.0, "5001/safe-output-error-count": 2.0,
                   "5002/run-conclusion": 1.0, "5002/mcp-tool-error-count": 0.0, "5002/safe-output-error-count": 0.0,
                   "5003/run-conclusion": 1.0, "5003/mcp-tool-error-count": 0.0, "5003/safe-output-error-count": 0.0}
    # A Copilot run without session events: its calls are the gateway's, the MCP errors among them.
    calls = dict(con.execute("""SELECT grader_id, value FROM grader_results WHERE run_id = '5001'
                                AND grader_id IN ('tool-call-count', 'tool-error-count')""").fetchall())
    assert calls["tool-error-count"] == got["5001/mcp-tool-error-count"] and calls["tool-call-count"] >= 4
    status = con.execute("SELECT status, family FROM grader_results WHERE run_id = '5001' AND grader_id = 'run-conclusion'")
    assert status.fetchall() == [("fail", "observed")]
    # The reference layer is unchanged: gh-aw's tool-success-rate never saw the 403s.
    ref = con.execute("SELECT source FROM grader_results WHERE run_id = '5001' AND grader_id = 'tool-success-rate'")
    assert ref.fetchall() == [("builtin",)]
    # Observed rows come after the plan's in the run's grader order, and count in its runs row.
    first, graders = con.execute("""SELECT min(grader_index) FILTER (WHERE source = 'fleetgrade'),
                                    (SELECT graders FROM runs WHERE run_id = '5001')
                                    FROM grader_results WHERE run_id = '5001'""").fetchone()
    assert first == len(default_plan().enabled) and graders == first + len(observed_plan().entries)


def test_the_failed_run_is_a_trace_fail(output: Path) -> None:
    verdicts = dict(connect(str(output)).execute("SELECT run_id, verdict FROM trace_verdicts").fetchall())
    assert verdicts["5001"] == "fail"
    assert verdicts["5002"] != "fail" and verdicts["5003"] != "fail"


def test_grader_drift_holds_only_the_disagreeing_archive(output: Path) -> None:
    rows = connect(str(output)).execute(
        "SELECT run_id, grader_id, differs, archived_value, archived_status, value, status FROM grader_drift").fetchall()
    assert rows == [("5003", "tool-success-rate", ["value", "status"], 0.25, "fail", 1.0, "pass")]


def test_the_report_shows_observed_grades_beside_the_reference_ones(output: Path, tmp_path: Path) -> None:
    from pipeline.report.queries import collect
    from pipeline.report.render import render
    from pipeline.report.scope import Selection

    page = render(collect(str(output), Selection()))
    assert 'data-grader="run-conclusion" data-values="3" data-layer="observed"' in page
    assert 'data-grader="tool-success-rate" data-values="3" data-layer="reference"' in page
    assert 'data-metric="grader-drift" data-grader="tool-success-rate" data-value="1"' in page
