from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graders.formats.claude_code import runs_from_transcript
from graders.formats.copilot import runs_from_copilot_events
from graders.formats.hooks import runs_from_audit
from graders.formats.jsonl import decode
from graders.formats.parsers import TraceFormatError, runs_from_traces


def test_traces_three_shapes_and_fallbacks():
    step = {"tool": "a", "ok": True}
    shape1 = {"tasks": [{"id": "G", "runs": [{"steps": [step]}, {"task": "H", "run_id": "h", "steps": []}]}]}
    runs = runs_from_traces(shape1)
    assert [(r.task, r.run_id, r.ok) for r in runs] == [("G", "G", True), ("H", "h", False)]
    assert [r.task for r in runs_from_traces({"runs": [{"steps": [step]}]})] == ["task"]
    assert [r.run_id for r in runs_from_traces([{"id": 7, "steps": []}])] == ["7"]
    assert runs_from_traces({}) == [] and runs_from_traces(None) == [] and runs_from_traces([]) == []


def test_traces_step_fields():
    (r,) = runs_from_traces([{"steps": [{"tool_name": "Read", "file_path": "a", "extra": 1, "step": "4", "ok": "false"},
                                        {"tool": None, "args": None, "observation": None}]}])
    s1, s2 = r.steps
    assert (s1.step, s1.tool, s1.args, s1.ok) == (4, "Read", {"file_path": "a"}, True)  # "false" is truthy
    assert (s2.step, s2.tool, s2.args, s2.observation) == (2, "", {}, "")
    assert r.ok is True


def test_traces_null_task_falls_back_to_default():
    assert runs_from_traces([{"task": None, "steps": []}])[0].task == "task"


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"runs": ["x"]}, "run 1: a run must be an object"),
        ({"runs": [{"steps": [{"step": "one"}]}]}, "run 1 step 1: 'step' must be an integer, got 'one'"),
        ({"runs": [{"steps": [{"step": None}]}]}, "'step' must be an integer, got None"),
        ({"runs": [{"steps": {"a": 1}}]}, "'steps' must be a list"),
        ({"runs": [{"steps": [3]}]}, "a step must be an object"),
        ({"tasks": [{"runs": 5}]}, "task 1: 'runs' must be a list"),
        ({"tasks": ["t"]}, "task 1: must be an object"),
        ({"tasks": {"a": 1}}, "'tasks' must be a list"),
        ({"runs": "abc"}, "'runs' must be a list"),
        ("abc", "top level must be an object or a list"),
    ],
)
def test_traces_malformed_is_a_clear_error(obj, message):
    with pytest.raises(TraceFormatError, match=message.replace("(", r"\(").replace(")", r"\)")):
        runs_from_traces(obj)


def test_audit_sessions_task_hint_and_warnings():
    lines = [
        json.dumps({"event": "SessionStart", "session_id": "s1"}),
        json.dumps({"session_id": "s1", "tool_name": "Edit", "file_path": "a.py", "command": "", "ok": False}),
        "[1, 2]",
        "not json",
        "",
        json.dumps({"session_id": "s2", "tool": "Bash", "command": "ls", "url": "u", "pattern": "p"}),
        json.dumps({"tool": "Write", "path": "b.py"}),
    ]
    warnings: list[str] = []
    runs = runs_from_audit(lines, source="a.jsonl", warn=warnings.append)
    assert [(r.task, r.run_id, len(r.steps), r.ok) for r in runs] == [
        ("s1", "s1", 1, False), ("s2", "s2", 1, True), ("audit-session", "audit-session", 1, True)]
    assert runs[1].steps[0].args == {"command": "ls", "url": "u"}
    assert warnings == ["a.jsonl:3: skipped: a JSON array, not an object", "a.jsonl:4: skipped: not valid JSON"]
    merged = runs_from_audit(lines, task_hint="T")
    assert [(r.task, r.run_id) for r in merged] == [("T", "s1"), ("T", "s2"), ("T", "T")]


def _tu(i, name, **inp):
    return {"type": "tool_use", "id": i, "name": name, "input": inp}


def _tr(i, content, **kw):
    return {"type": "tool_result", "tool_use_id": i, "content": content, **kw}


def test_transcript_join_sidechain_and_session():
    lines = [
        {"type": "user", "sessionId": "S", "message": {"content": "hi"}},
        {"type": "assistant", "message": {"content": [_tu("1", "Grep", pattern="p", path="d", glob="*.py"), "x"]}},
        {"type": "user", "message": {"content": [_tr("1", [{"type": "text", "text": "a"}, {"type": "image"}, 5])]}},
        {"isSidechain": True, "message": {"content": [_tu("2", "Bash", command="ls")]}},
        {"isSidechain": "false", "message": {"content": [_tu("3", "Bash", command="ls")]}},
        {"type": "user", "message": {"content": [_tr("4", "x" * 300, is_error=1)]}},
        {"message": {"content": [_tu("4", "Read", file_path="a.py")]}},  # result came first: still joined
        {"message": "not a dict"},
        {"message": {"content": [_tu("5", "Edit", file_path="a.py", old_string="o")]}},
    ]
    (run,) = runs_from_transcript(lines)
    assert run.run_id == "S" and run.ok is True
    assert [(s.tool, s.ok) for s in run.steps] == [("Grep", True), ("Read", False), ("Edit", True)]
    assert run.steps[0].args == {"pattern": "p", "path": "d"} and run.steps[0].observation == "a "
    assert len(run.steps[1].observation) == 200
    assert runs_from_transcript(lines, task_hint="T")[0].run_id == "T"  # reference: hint wins
    assert runs_from_transcript([{"isSidechain": True, "message": {"content": [_tu("1", "X")]}}]) == []


def test_copilot_join_failures_and_subagents():
    def ev(type_, **data):
        return {"type": type_, "data": data}

    lines = [
        ev("session.start", sessionId="S"),
        ev("tool.execution_start", toolCallId="a", toolName="bash", arguments={"command": "make", "timeout": 5}),
        ev("tool.execution_start", toolCallId="b", toolName="view", arguments={"path": "x"}),
        ev("tool.execution_complete", toolCallId="b", success=True, result={"content": "ok"}),
        ev("tool.execution_complete", toolCallId="a", success=True, error={"message": "denied", "code": "denied"}),
        ev("tool.execution_start", toolCallId="c", toolName="view", parentToolCallId="t"),
        {"type": "tool.execution_start", "agentId": "t", "data": {"toolCallId": "d", "toolName": "view"}},
        ev("tool.execution_start", toolCallId="e", toolName="edit"),
        ev("tool.execution_complete", toolCallId="e", success=False),
        ev("tool.execution_start", toolCallId="e", toolName="edit"),  # replayed start counts once
        ev("tool.execution_complete", toolCallId="zz", success=False),  # no start: no step
        ev("tool.execution_start", toolName="noid"),
    ]
    (run,) = runs_from_copilot_events(lines)
    assert [(s.tool, s.ok, s.observation) for s in run.steps] == [
        ("bash", False, "denied"), ("view", True, "ok"), ("edit", False, ""), ("noid", True, "")]
    assert run.steps[0].args == {"command": "make"}
    assert (run.task, run.run_id, run.ok) == ("S", "S", True)
    assert runs_from_copilot_events([ev("session.start", sessionId="S")]) == []


def test_decode_replaces_bad_utf8_and_splits_like_splitlines():
    warnings: list[str] = []
    assert decode(b'{"a": 1}\r\n\xff\n', "f", warnings.append) == ['{"a": 1}', "\ufffd"]
    assert warnings and warnings[0].startswith("f: not valid UTF-8")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
KEYS = ["type", "data", "message", "content", "isSidechain", "sessionId", "session_id", "tool_name", "tool", "ok",
        "toolCallId", "toolName", "arguments", "success", "error", "result", "agentId", "parentToolCallId",
        "tool_use_id", "id", "name", "input", "is_error", "file_path", "path", "text"]
shaped = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6)
    | st.sampled_from(["tool_use", "tool_result", "tool.execution_start", "tool.execution_complete", "session.start"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.sampled_from(KEYS), children, max_size=6),
    max_leaves=20,
)
PARSERS = [runs_from_audit, runs_from_transcript, runs_from_copilot_events]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.lists(st.text(max_size=40), max_size=8), st.none() | st.text(max_size=5))
def test_jsonl_parsers_never_crash_on_text(lines, hint):
    for parse in PARSERS:
        parse(lines, task_hint=hint)


@SETTINGS
@given(st.binary(max_size=200))
def test_jsonl_parsers_never_crash_on_bytes(data):
    for parse in PARSERS:
        parse(decode(data))
        parse(data.split(b"\n"))


@SETTINGS
@given(st.lists(json_values | shaped, max_size=8))
def test_jsonl_parsers_never_crash_on_json_values(values):
    lines = [json.dumps(v) for v in values]
    for parse in PARSERS:
        for run in parse(lines):
            assert isinstance(run.task, str) and isinstance(run.run_id, str)
            assert all(isinstance(s.tool, str) and isinstance(s.ok, bool) for s in run.steps)


@SETTINGS
@given(json_values | shaped)
def test_traces_parser_raises_only_trace_format_errors(obj):
    try:
        runs = runs_from_traces(obj)
    except TraceFormatError:
        return
    assert all(isinstance(r.task, str) and isinstance(r.run_id, str) for r in runs)
