"""``--self-test`` (spec §8): grade the bundled fixture and check the five assertions.

Hermetic like the newest reference: it builds its own config (engine defaults plus
forbidden ``force_push``, retry threshold 2, ``read`` before ``edit``) instead of reading one.
"""

from __future__ import annotations

import json
from dataclasses import replace
from importlib import resources
from typing import Any, TextIO

from graders.families.trace_rules.config import TraceConfig, default_config
from graders.families.trace_rules.report import RULE, render
from graders.families.trace_rules.rules import edited_without_read
from graders.families.trace_rules.verdicts import grade
from graders.formats.claude_code import runs_from_transcript
from graders.formats.model import Run, Step
from graders.formats.parsers import runs_from_traces

FIXTURE = "trace-grader.fixtures.json"


def selftest_config() -> TraceConfig:
    return replace(
        default_config(),
        forbidden_tools=frozenset({"force_push"}),
        retry_threshold=2,
        must_precede=(("read", "edit"),),
    )


def load_fixture() -> Any:
    text = resources.files("graders.families.trace_rules").joinpath("fixtures", FIXTURE).read_text(encoding="utf-8")
    return json.loads(text)


_TRANSCRIPT: list[dict[str, Any]] = [
    {"type": "assistant", "sessionId": "S1", "message": {"content": [
        {"type": "tool_use", "id": "u1", "name": "Grep", "input": {"pattern": "def record", "path": "harness"}}]}},
    {"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": "u1", "content": "3 matches", "is_error": False}]}},
    {"type": "assistant", "message": {"content": [
        {"type": "tool_use", "id": "u2", "name": "Read", "input": {"file_path": "a.py"}}]}},
    {"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": "u2", "content": "boom", "is_error": True}]}},
    {"type": "assistant", "isSidechain": True, "message": {"content": [
        {"type": "tool_use", "id": "sc1", "name": "Bash", "input": {"command": "ls"}}]}},
]


def _transcript_ok() -> bool:
    runs = runs_from_transcript(_TRANSCRIPT)
    if len(runs) != 1:
        return False
    r = runs[0]
    return (
        r.run_id == "S1" and len(r.steps) == 2 and r.ok is True
        and r.steps[0].tool == "Grep" and r.steps[0].args.get("pattern") == "def record"
        and r.steps[0].ok is True and r.steps[1].ok is False and r.steps[1].observation == "boom"
    )


def _grounding_ok(cfg: TraceConfig) -> bool:
    def run(*steps: tuple[str, str]) -> Run:
        return Run("g", "g", True, [Step(i, t, {"file_path": p}) for i, (t, p) in enumerate(steps, 1)])

    ungrounded = edited_without_read(run(("Edit", "x.py")), cfg)
    return (
        len(ungrounded) == 1 and ungrounded[0].check == "edited_without_read"
        and edited_without_read(run(("Read", "x.py"), ("Edit", "x.py")), cfg) == []
        and edited_without_read(run(("Write", "n.py"), ("Edit", "n.py")), cfg) == []
    )


def self_test(out: TextIO) -> int:
    cfg = selftest_config()
    report = grade(runs_from_traces(load_fixture()), cfg)
    print(render(report), file=out)
    print(RULE, file=out)
    by_id = {r.run_id: r for r in report.runs}
    pass_k = report.pass_k()
    a, b = by_id.get("T1-clean-r1"), by_id.get("T2-corrupt-r1")
    c = pass_k.get("T3-flaky", {})
    checks = [
        ("(a) clean trace  → clean-pass, 0 flags",
         a is not None and a.verdict == "clean-pass" and not a.flags),
        ("(b) retry-storm + forbidden tool → flags raised + corrupt-success",
         b is not None and {"retry_storm", "forbidden_tool"} <= {f.check for f in b.flags}
         and b.corrupt_success and b.verdict == "corrupt-success"),
        ("(c) pass^3, 1 of 3 fails → pass^3 = fail",
         c.get("k") == 3 and c.get("pass_hat_k") is False and c.get("n_fail") == 1),
        ("(d) transcript → retrieval args + per-step ok + sidechain skipped (GH#4)", _transcript_ok()),
        ("(e) grounding → edit-without-read flagged; read-first & write-first clean (GH#4)", _grounding_ok(cfg)),
    ]
    print("self-test assertions:", file=out)
    for label, ok in checks:
        print(f"    [{'OK ' if ok else 'XX '}] {label}", file=out)
    all_ok = all(ok for _, ok in checks)
    print(RULE, file=out)
    print("SELF-TEST: " + ("ALL PASS" if all_ok else "FAILED"), file=out)
    return 0 if all_ok else 1
