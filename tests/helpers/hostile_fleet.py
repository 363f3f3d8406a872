"""A small fleet of hostile runs (issues 28 and 40) beside good ones, built in a temporary folder.

``make_hostile_fleet`` writes issue 28's cases and issue 40's output-side ones (identities claimed
across input kinds, control characters in names); tests/helpers/hostile_numbers.py's
``make_number_fleet`` writes issue 40's input-side ones into the same folder (``ALL_*`` below hold
the expectations of both).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

SECRET = "host-secret-3f9c1e"  # content of a file outside the fleet that a run links to

GOOD = ("good/run-1", "good/run-2")
# run folder (relative to the fleet) -> what its dead letter's message must say
DEAD: dict[str, str] = {
    "wf-attempt/run-40": "run_attempt",
    "wf-attempt/run-300": "run_attempt",
    "wf-date/0000-00-00/11": "0000-00-00",
    "wf-date/2026-13-45/12": "2026-13-45",
    "wf-long/run-6": "workflow_name is 300 characters long",
    "wf-\\xff": "this folder: name is not valid UTF-8",  # a folder outside any run, not entered
}
# run folder -> what one of its warnings says (it is graded)
WARNED: dict[str, str] = {
    "wf-bytes/run-2": "bad-\\xff.json: name is not valid UTF-8",
    "wf-fifo/run-7": "agent_output.json: not a regular file",
    "wf-zero/run-8": "mcp-logs/gateway.jsonl: symbolic link to a place outside the run folder",
    "wf-link/run-13": "agent_output.json: symbolic link to a place outside the run folder",
    "wf-json/run-10": "agent_output.json: nested deeper than 1024 levels",
}
# graded runs whose identity or data is hostile but valid
GRADED = ("wf-deep/run-1", "wf-json/run-9", "wf-cjk/run-5", "wf-null/run-15")
CJK_WORKFLOW = "工作流程" * 30
NULL_WORKFLOW = "__HIVE_DEFAULT_PARTITION__"

# Issue 40, output side.
ESC = "\x1b]0;pwned\x07\x1b[2J"  # retitles the terminal, then clears the screen
FORGED = "2026-01-01 00:00:00,000 INFO fleetgrade: all good"  # a log line, after a newline in a name
BIDI_WORKFLOW = "abc\u202edef"  # a right-to-left override: valid, graded, shown escaped
CLAIM = "2 inputs hold the run (workflow 'wf-claim', run '50', attempt 1) with different files"
DEAD_40: dict[str, str] = {
    "wf-claim/run-50": CLAIM,  # a run folder, and a session file whose records claim its identity
    "wf-claim/claim.jsonl": CLAIM,
    "wf-esc/run-60": f"no gh-aw run artifacts (aw_info.json, agent_output.json, mcp-logs/, sandbox/, …) found; "
                     f"it holds notes{ESC}.txt",
    "wf-nl/run-62": f"it holds x\n{FORGED}.txt",
    f"wf{ESC}/run-61": "the workflow folder holds the control character '\\x1b'",
    "wf-sess/esc.jsonl": "run id holds the control character '\\x1b'",
}
GRADED_40 = ("wf-bidi/run-63", "wf-tool/run-64", "wf-huge/run-70")
# The statistics' boundary: a grader value near the float maximum, beside an ordinary run of its workflow.
HUGE = "statistics: execution-duration: value 1.7e+308 is beyond ±1e+100"
WARNED_40: dict[str, str] = {"wf-huge/run-71": HUGE}


def _run(folder: Path, info: dict[str, object] | None, output: str | None = '{"items": []}') -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if info is not None:
        (folder / "aw_info.json").write_text(json.dumps(info))
    if output is not None:
        (folder / "agent_output.json").write_text(output)
    return folder


def _info(run_id: int, **extra: object) -> dict[str, object]:
    return {"run_id": run_id, "created_at": "2026-05-01T10:00:00Z", **extra}


def remove_nest(folder: Path) -> None:
    """Remove a chain of ``d`` folders inside ``folder``, deepest first: ``shutil.rmtree`` (and so
    pytest's clean-up of old temporary folders in a later session) recurses and fails on it."""
    depth = 0
    while (folder / "/".join(["d"] * (depth + 1))).is_dir():
        depth += 1
    for level in range(depth, 0, -1):
        inner = folder / "/".join(["d"] * level)
        for entry in os.listdir(inner):
            os.unlink(inner / entry)
        os.rmdir(inner)


def make_hostile_fleet(root: Path) -> Path:
    fleet = root / "fleet"
    for i, rel in enumerate(GOOD, 1):
        _run(fleet / rel, _info(i))
        (fleet / rel / "mcp-logs").mkdir()
        (fleet / rel / "mcp-logs" / "gateway.jsonl").write_text('{"type":"tool_call","tool_name":"a"}\n')
    # folders nested ~1,100 deep inside a run
    deep = _run(fleet / "wf-deep/run-1", _info(1))
    fd = os.open(deep, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(1100):  # one level at a time: os.makedirs recurses per level
        os.mkdir("d", dir_fd=fd)
        fd, old = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd), fd
        os.close(old)
    os.close(fd)
    # a file whose name is not valid UTF-8
    _run(fleet / "wf-bytes/run-2", _info(2))
    with open(os.path.join(os.fsencode(fleet / "wf-bytes/run-2"), b"bad-\xff.json"), "wb") as fh:
        fh.write(b"{}")
    # a folder whose name is not valid UTF-8, holding a run
    os.makedirs(os.path.join(os.fsencode(fleet), b"wf-\xff", b"run-3"))
    with open(os.path.join(os.fsencode(fleet), b"wf-\xff", b"run-3", b"aw_info.json"), "w") as fh:
        fh.write(json.dumps(_info(3)))
    # run_attempt beyond the column's range
    _run(fleet / "wf-attempt/run-40", _info(40, run_attempt=2**40))
    _run(fleet / "wf-attempt/run-300", _info(300, run_attempt=1e300))
    # a 300-character workflow_name (refused) and a long CJK one (kept, hash-suffixed partition)
    _run(fleet / "wf-long/run-6", _info(6, workflow_name="w" * 300))
    _run(fleet / "wf-cjk/run-5", _info(5, workflow_name=CJK_WORKFLOW))
    # agent_output.json is a FIFO
    _run(fleet / "wf-fifo/run-7", _info(7), output=None)
    os.mkfifo(fleet / "wf-fifo/run-7/agent_output.json")
    # mcp-logs/gateway.jsonl linked to /dev/zero
    _run(fleet / "wf-zero/run-8", _info(8))
    (fleet / "wf-zero/run-8/mcp-logs").mkdir()
    os.symlink("/dev/zero", fleet / "wf-zero/run-8/mcp-logs/gateway.jsonl")
    # valid JSON nested 600 deep, and nested deeper than the parser goes
    _run(fleet / "wf-json/run-9", _info(9), output='{"items": ' + "[" * 600 + "]" * 600 + "}")
    _run(fleet / "wf-json/run-10", _info(10), output='{"items": ' + "[" * 5000 + "]" * 5000 + "}")
    # YYYY-MM-DD folders that are not dates (no created_at: the date comes from the folder)
    _run(fleet / "wf-date/0000-00-00/11", {"run_id": 11})
    _run(fleet / "wf-date/2026-13-45/12", {"run_id": 12})
    # a link to a file outside the fleet
    secret = root / "secret.json"
    secret.write_text(json.dumps({"items": [{"type": "create_issue", "body": SECRET}]}))
    _run(fleet / "wf-link/run-13", _info(13), output=None)
    os.symlink(secret, fleet / "wf-link/run-13/agent_output.json")
    # a workflow literally named as hive's null
    _run(fleet / "wf-null/run-15", _info(15, workflow_name=NULL_WORKFLOW))
    _issue_40(fleet)
    return fleet


def _hook_log(path: Path, session: str, tool: str = "Read") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    records = [{"ts": "2026-05-01T10:00:00Z", "session_id": session, "hook": hook, "tool": tool, "command": "ls",
                "exit_code": code} for hook, code in (("PreToolUse", ""), ("PostToolUse", 0))]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _issue_40(fleet: Path) -> None:
    # a session file in the workflow's folder whose records claim the run folder's identity
    _run(fleet / "wf-claim/run-50", _info(50))
    _hook_log(fleet / "wf-claim/claim.jsonl", "50")
    # control characters in a file name, a folder name, a session id, a tool name; a bidi override
    _run(fleet / "wf-esc/run-60", None, output=None)
    (fleet / "wf-esc/run-60" / f"notes{ESC}.txt").write_text("an escape sequence in a name")
    _run(fleet / "wf-nl/run-62", None, output=None)
    (fleet / "wf-nl/run-62" / f"x\n{FORGED}.txt").write_text("a newline in a name")
    _run(fleet / f"wf{ESC}/run-61", _info(61))
    _hook_log(fleet / "wf-sess/esc.jsonl", f"s{ESC}")
    _run(fleet / "wf-bidi/run-63", _info(63, workflow_name=BIDI_WORKFLOW))
    _run(fleet / "wf-tool/run-64", _info(64))
    (fleet / "wf-tool/run-64/mcp-logs").mkdir()
    (fleet / "wf-tool/run-64/mcp-logs/gateway.jsonl").write_text(
        json.dumps({"type": "tool_call", "tool_name": f"evil{ESC}", "status": "error", "error": f"x{ESC}"}) + "\n")
    for run_id, ms in ((70, 1000), (71, 1.7e308)):  # execution-duration, in ms
        usage = _run(fleet / f"wf-huge/run-{run_id}", _info(run_id)) / "sandbox/firewall/logs/api-proxy-logs"
        usage.mkdir(parents=True)
        (usage / "token-usage.jsonl").write_text(json.dumps(
            {"timestamp": "2026-05-01T10:00:01Z", "event": "token_usage", "request_id": f"r{run_id}", "model": "gpt-5",
             "provider": "copilot", "input_tokens": 10, "output_tokens": 5, "duration_ms": ms}) + "\n")
