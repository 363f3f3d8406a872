"""Real-format samples of our own making (tests/data/trace_samples), with their expected verdicts."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from graders.formats.claude_code import runs_from_transcript
from graders.formats.copilot import runs_from_copilot_events
from graders.formats.jsonl import read_lines
from pipeline import cmd_trace

SAMPLES = Path(__file__).resolve().parents[2] / "data" / "trace_samples"
CLAUDE_SID = "5d0c1e7a-93b2-4f6e-8a41-2c7b9e0f3d15"
CLAUDE = SAMPLES / "claude" / f"{CLAUDE_SID}.jsonl"
CLAUDE_SUBAGENT = SAMPLES / "claude" / CLAUDE_SID / "subagents" / "agent-a7f3c21.jsonl"
COPILOT_SID = "b41e7c2d-0f6a-4c39-9d15-7a2e8c3f5b90"
COPILOT = SAMPLES / "copilot" / COPILOT_SID / "events.jsonl"
CONFIG = SAMPLES / "config.yaml"


def cli(capsys, *argv: str) -> tuple[int, dict]:
    parser = argparse.ArgumentParser(prog="fleetgrade")
    cmd_trace.register(parser.add_subparsers())
    args = parser.parse_args(["trace", *argv, "--config", str(CONFIG), "--json"])
    code = args.func(args)
    return code, json.loads(capsys.readouterr().out)


def test_claude_transcript_parse():
    (run,) = runs_from_transcript(read_lines(CLAUDE))
    # Task is a main-chain step; the sidechain Bash and the progress-nested Grep are not.
    assert [s.tool for s in run.steps] == ["Glob", "Read", "Task", "Edit", "Edit", "Bash"]
    assert run.run_id == run.task == CLAUDE_SID and run.ok is True
    assert run.steps[0].args == {"pattern": "**/cart*.py", "path": "/home/dev/shop"}
    assert run.steps[2].args == {"prompt": "Find every caller of Cart.total and report which ones pass a discount."}
    assert run.steps[2].observation.startswith("Two callers: checkout.py:41")
    assert [s.ok for s in run.steps] == [True, True, True, True, False, True]


def test_claude_transcript_verdict(capsys):
    code, out = cli(capsys, "--transcript", str(CLAUDE))
    assert code == 0
    (r,) = out["runs"]
    assert r["verdict"] == "pass-with-warnings" and r["step_count"] == 6
    assert r["flags"] == [{
        "check": "edited_without_read", "severity": "medium", "step": 5, "tool": "Edit",
        "detail": "'Edit' edited '/home/dev/shop/shop/api.py' at step 5 without reading it first (ungrounded)",
    }]


def test_claude_subagent_file_grades_zero_runs(capsys):
    code, out = cli(capsys, "--transcript", str(CLAUDE_SUBAGENT))
    assert code == 0 and out["runs"] == [] and out["summary"]["n_runs"] == 0


def test_copilot_events_parse():
    (run,) = runs_from_copilot_events(read_lines(COPILOT), task_hint="cart-fix")
    # The subagent's two view calls (agentId / parentToolCallId) are not main-run steps.
    assert [s.tool for s in run.steps] == ["report_intent", "view", "task", "bash", "bash", "bash", "edit"]
    assert [s.ok for s in run.steps] == [True, True, True, False, False, False, True]
    assert run.task == "cart-fix" and run.run_id == COPILOT_SID and run.ok is True
    assert run.steps[3].observation == "Command failed with exit code 1: 2 failing"
    assert run.steps[1].args == {"path": "/home/dev/shop/shop/cart.py"}


def test_copilot_events_verdict(capsys):
    code, out = cli(capsys, "--copilot-events", str(COPILOT), "--k", "2")
    assert code == 0
    (r,) = out["runs"]
    assert r["verdict"] == "pass-with-warnings"
    assert [(f["check"], f["step"], f["detail"]) for f in r["flags"]] == [
        ("out_of_order", 7, "'edit' at step 7 not preceded by 'read'"),  # Copilot reads with `view`
        ("retry_storm", 4, "'bash' failed 3x in a row (> threshold 2)"),
    ]
    assert out["pass_k_estimates"][COPILOT_SID]["pass_k"][1] == {"k": 2, "pass_hat_k": None, "pass_at_k": None}
