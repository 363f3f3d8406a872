"""Every trace-grader conformance case through ``fleetgrade trace``, in process.

Compares the exit code and the whole ``--json`` document (or the exact human stdout).
Cases that pin a reference bug we fix are listed in ``FIXED`` with the reason and assert
our documented behaviour instead (docs/deviations-trace-grader.md).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from pipeline import cmd_trace
from tests.conftest import conformance_dir

CASES_DIR = conformance_dir() / "trace-grader"
CASES = sorted(p for p in CASES_DIR.iterdir() if p.is_dir() and p.name.startswith("case-"))

# case -> (reason, expected exit code, expected stdout JSON or None, stderr substring)
def _summary(n_runs: int, warn: int) -> dict[str, Any]:
    return {
        "n_runs": n_runs,
        "n_tasks": n_runs,
        "verdicts": {"clean-pass": 0, "pass-with-warnings": warn, "corrupt-success": 0, "fail": 0},
        "tasks_repeatable": n_runs,
        "tasks_flaky": 0,
        "judge_axis": "disabled (adapter, verified:false)",
    }


_NON_OBJECT_LINE = "non-object JSONL line: skipped with a warning naming file:line, the rest is graded"
FIXED: dict[str, tuple[str, int, dict[str, Any] | None, str]] = {
    # Deviation 9a: reference crashes (exit 1). Line 1 still grades: an Edit of a.py never read.
    "case-067-error-non-object-jsonl-line-audit": (
        _NON_OBJECT_LINE,
        0,
        {
            "runs": [{
                "task": "s", "run_id": "s", "delivered": True, "step_count": 1,
                "flags": [{
                    "check": "edited_without_read", "severity": "medium", "step": 1, "tool": "Edit",
                    "detail": "'Edit' edited 'a.py' at step 1 without reading it first (ungrounded)",
                }],
                "corrupt_success": False, "verdict": "pass-with-warnings",
            }],
            "pass_k": {"s": {"k": 1, "n_success": 1, "n_fail": 0, "pass_hat_k": True}},
            "summary": _summary(1, 1),
        },
        "audit.jsonl:2: skipped: a JSON array, not an object",
    ),
    # Deviation 9a: line 1 is an audit-shaped object with no message.content, so zero runs.
    "case-076-error-non-object-jsonl-line-transcript": (
        _NON_OBJECT_LINE,
        0,
        {"runs": [], "pass_k": {}, "summary": _summary(0, 0)},
        "transcript.jsonl:2: skipped: a JSON array, not an object",
    ),
}


# Error cases: same exit code as the reference, plus a message naming the file or key.
ERROR_MESSAGES: dict[str, str] = {
    "case-065-error-no-source-flag": "provide --traces, --audit, --transcript, --copilot-events",
    "case-066-error-traces-bad-json": "traces.json: not valid JSON",
    "case-068-error-null-retry-threshold": "config.yaml: config key 'retry_threshold' must be an integer, got null",
    "case-069-error-missing-input-file": "cannot read --audit file 'does-not-exist.json'",
    "case-070-error-non-numeric-step": "traces.json: run 1 step 1: 'step' must be an integer, got 'one'",
    "case-071-error-run-not-object": "traces.json: run 1: a run must be an object",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fleetgrade")
    cmd_trace.register(parser.add_subparsers(dest="command"))
    return parser


def run_case(case: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    cmd = json.loads((case / "cmd.json").read_text(encoding="utf-8"))
    monkeypatch.chdir(case)
    args = _parser().parse_args(["trace", *cmd["flags"]])
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_corpus_is_complete():
    assert len(CASES) == 80


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case(case: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    expected = json.loads((case / "expected.json").read_text(encoding="utf-8"))
    code, out, err = run_case(case, monkeypatch, capsys)
    if case.name in FIXED:
        _reason, exit_code, output, stderr_part = FIXED[case.name]
        assert code == exit_code, err
        if output is not None:
            assert json.loads(out) == output
        assert stderr_part in err
        return
    assert code == expected["exit_code"], err
    if expected.get("output") is not None:
        got = json.loads(out)
        assert list(got) == ["runs", "pass_k", "summary"]
        assert got == expected["output"]
    if expected.get("stdout") is not None:
        assert out.rstrip("\n") == expected["stdout"].rstrip("\n")
    if expected.get("stderr_contains"):
        assert expected["stderr_contains"] in err
    if case.name in ERROR_MESSAGES:
        assert ERROR_MESSAGES[case.name] in err
    elif expected["exit_code"] in (1, 2):
        pytest.fail(f"error case {case.name} has no pinned error message")
