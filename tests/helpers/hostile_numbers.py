"""Runs whose numbers, nesting, identities, dates and encodings are hostile (issue 40, input side),
built in a temporary folder: what each becomes (graded, warned or a dead letter saying what).

``make_number_fleet`` writes them under ``<root>/fleet``; the expectations below are keyed by
the run's folder or session file relative to the fleet, as tests/helpers/hostile_fleet.py's are.
"""

from __future__ import annotations

import json
from pathlib import Path

BIG = "9" * 400  # past the doubles: JSON.parse reads ±Infinity
HUGE = "7" * 5000  # past Python's 4,300-digit int() limit
LONG = "1234567890123456789"  # 19 digits: past 2**53, within 64 bits (orjson's, then JSON.parse's double)
CREATED = "2026-05-01T10:00:00Z"
INLINE_WORKFLOW = "n-inline"

# graded, no dead letter and no warning
GRADED: tuple[str, ...] = (
    "n-int400/run-1",  # a 400-digit integer in agent_output.json ("int too large to convert to float")
    "n-gw5k/run-2",  # a 5,000-digit integer in the gateway log
    "n-tokens/run-3",  # token counts past the doubles: Infinity, stored as null
    "n-issue/run-4",  # a 5,000-digit issue number: once graded and dead-lettered
    "n-deep-info/run-5",  # aw_info.json 600 deep, a 19-digit leaf (was a dead letter)
    "n-deep-out/run-6",  # agent_output.json 1,000 deep, a 19-digit leaf (was "nested deeper than 1024")
    f"{INLINE_WORKFLOW}/run-7",  # an inline grader handed a trace 1,000 deep (was a RecursionError)
    "n-surrogate/run-8",  # lone surrogate escapes in identity and data
    "n-exact/run-9",  # run_id 2**53 as a number: the largest exact one
    "sessions/big.jsonl",  # a session file whose lines hold all of the above
)
# run folder or session file -> what its dead letter's message says (after the path)
DEAD: dict[str, str] = {
    "n-attempt/run-10": "aw_info.json: run_attempt must be a whole number from 1 to 2147483647, got '²'",
    "n-runid/run-11": "aw_info.json: run_id must be text or a whole number up to 2^53, got a number beyond the "
                      "range of a double",
    "n-runid19/run-12": "aw_info.json: run_id must be text or a whole number up to 2^53, got 1234567890123456800",
    "n-date/run-13": "aw_info.json: created_at '0001-01-01T00:00:00Z' is dated 0001-01-01, outside the run dates "
                     "fleetgrade grades (1970-01-01 to 2199-12-31)",
    "n-future/run-14": "aw_info.json: created_at '9999-12-31T23:59:59Z' is dated 9999-12-31, outside the run dates",
    "n-folder/1900-01-01/run-15": "the folder '1900-01-01' in its path is not a real date (YYYY-MM-DD) within the "
                                  "run dates fleetgrade grades",
    "n-utf16/run-16": "aw_info.json: not valid UTF-8",
    "n-nan/run-17": "aw_info.json: not valid JSON",
    "n-created/run-18": "aw_info.json: created_at must be an ISO 8601 timestamp (text), got 1777629600",
    "sessions/old.jsonl": "sessions/old.jsonl: the session's first timestamp '0001-01-01T00:00:00+00:00' is dated "
                          "0001-01-01, outside the run dates",
}
# graded, with a warning that starts so
WARNED: dict[str, str] = {
    "n-too-deep/run-19": "agent_output.json: nested deeper than 1024 levels",
}
SESSION_WARNED = ("sessions/big.jsonl", "skipped: nested deeper than 1024 levels")


def _deep(leaf: str, depth: int) -> str:
    return "[" * depth + leaf + "]" * depth


def _run(fleet: Path, rel: str, info: str | None, files: dict[str, str | bytes] | None = None) -> None:
    folder = fleet / rel
    folder.mkdir(parents=True)
    if info is not None:
        (folder / "aw_info.json").write_text(info)
    files = {"agent_output.json": '{"items": []}', "mcp-logs/gateway.jsonl":
             '{"type":"tool_call","tool_name":"search","arguments":{"q":"x"}}\n', **(files or {})}
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data.encode() if isinstance(data, str) else data)


def _info(workflow: str, run_id: int | str, **extra: str) -> str:
    """aw_info.json text; ``extra`` values are JSON text, written as they are."""
    fields = {"workflow_name": json.dumps(workflow), "run_id": json.dumps(run_id), "created_at": json.dumps(CREATED),
              **extra}
    return "{" + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + "}"


def _fill(template: str, *values: str) -> str:
    """``template`` with each ``@`` replaced by the next value (JSON text holds braces)."""
    parts = template.split("@")
    assert len(parts) == len(values) + 1, template
    return "".join(p + v for p, v in zip(parts, [*values, ""], strict=True))


def _session_line(ts: str, content: str) -> str:
    return _fill('{"parentUuid":null,"type":"assistant","sessionId":"s-@","uuid":"u","timestamp":"@",'
                 '"message":{"role":"assistant","content":[@]}}\n', ts[:4], ts, content)


def inline_graders(folder: Path) -> Path:
    """A graders folder giving ``INLINE_WORKFLOW`` an inline grader that walks its whole trace."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{INLINE_WORKFLOW}.md").write_text(
        "---\ngraders:\n  trace-size:\n    unit: count\n    direction: higher_is_better\n    threshold: 1\n"
        "    script: \"return JSON.stringify(trace).length\"\n---\n")
    return folder


def make_number_fleet(root: Path) -> Path:
    fleet = root / "fleet"
    item = '{"items": [{"type": "create_issue", "title": "t", "body": "b", "n": @}]}'
    _run(fleet, "n-int400/run-1", _info("n-int400", 1), {"agent_output.json": _fill(item, BIG)})
    _run(fleet, "n-gw5k/run-2", _info("n-gw5k", 2), {
        "mcp-logs/gateway.jsonl": _fill('{"type":"tool_call","tool_name":"a","arguments":{"n":@}}\n', HUGE)})
    _run(fleet, "n-tokens/run-3", _info("n-tokens", 3), {
        "sandbox/firewall-audit-logs/api-proxy-logs/token-usage.jsonl":
            _fill('{"input_tokens":@,"output_tokens":1e400,"model":"m"}\n{"input_tokens":5,"output_tokens":7}\n', BIG)})
    _run(fleet, "n-issue/run-4", _info("n-issue", 4, issue_number=json.dumps(HUGE)))
    _run(fleet, "n-deep-info/run-5", _info("n-deep-info", 5, extra=_deep(LONG, 600)))
    _run(fleet, "n-deep-out/run-6", _info("n-deep-out", 6), {"agent_output.json": _fill(item, _deep(LONG, 1000))})
    _run(fleet, f"{INLINE_WORKFLOW}/run-7", _info(INLINE_WORKFLOW, 7), {
        "mcp-logs/gateway.jsonl": _fill('{"type":"tool_call","tool_name":"a","arguments":{"d":@}}\n', _deep("1", 1000))})
    _run(fleet, "n-surrogate/run-8", _info("n-surrogate", 8, repository='"o/r\\ud800"'), {
        "agent_output.json": '{"items": [{"type": "create_issue", "title": "\\udc00", "body": "b"}]}'})
    _run(fleet, "n-exact/run-9", _info("n-exact", 2**53))
    _run(fleet, "n-attempt/run-10", _info("n-attempt", 10, run_attempt='"²"'))
    _run(fleet, "n-runid/run-11", _fill('{"workflow_name": "n-runid", "run_id": @, "created_at": "@"}', BIG, CREATED))
    _run(fleet, "n-runid19/run-12", _fill('{"workflow_name": "n-runid19", "run_id": @, "created_at": "@"}', LONG,
                                          CREATED))
    _run(fleet, "n-date/run-13", _info("n-date", 13, created_at='"0001-01-01T00:00:00Z"'))
    _run(fleet, "n-future/run-14", _info("n-future", 14, created_at='"9999-12-31T23:59:59Z"'))
    _run(fleet, "n-folder/1900-01-01/run-15", '{"run_id": 15}')
    _run(fleet, "n-utf16/run-16", None, {"aw_info.json": _info("n-utf16", 16).encode("utf-16")})
    _run(fleet, "n-nan/run-17", _info("n-nan", 17, extra="NaN"))
    _run(fleet, "n-created/run-18", _info("n-created", 18, created_at="1777629600"))
    _run(fleet, "n-too-deep/run-19", _info("n-too-deep", 19), {"agent_output.json": _fill(item, _deep(LONG, 1100))})
    sessions = fleet / "sessions"
    sessions.mkdir()
    call = '{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls","n":@,"m":@,"d":@,"s":"\\ud800"}}'
    (sessions / "big.jsonl").write_text(
        _session_line(CREATED, _fill(call, HUGE, BIG, _deep(LONG, 1000)))
        + _session_line(CREATED, _fill('{"type":"text","text":@}', _deep("1", 1100))))
    (sessions / "old.jsonl").write_text(_session_line("0001-01-01T00:00:00Z", '{"type":"text","text":"x"}'))
    return fleet
