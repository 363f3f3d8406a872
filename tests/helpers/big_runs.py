"""Runs at a (scaled-down) read budget, made on the fly: what the per-run memory bound is measured
on (tests/graders/test_run_memory.py, docs/hostile-input.md "Memory")."""

from __future__ import annotations

import json
from pathlib import Path

REAL = Path(__file__).resolve().parents[1] / "data" / "real" / "claude_code" / "spotter-session-with-subagents"
SESSION = "ae4a77f8-aedd-4bc1-888f-c94edc91af04"


def _fill(path: Path, lines: list[bytes], size: int) -> None:
    """``path`` written with ``lines`` in turn, each tool id made unique, up to ``size`` bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    written = i = 0
    with open(path, "wb") as fh:
        while True:
            line = lines[i % len(lines)].replace(b"toolu_", b"toolu_%d_" % i) + b"\n"
            if written + len(line) > size:
                return
            fh.write(line)
            written += len(line)
            i += 1


def claude_session(folder: Path, size: int, subagents: int = 8, shape: str = "real") -> Path:
    """A Claude Code session of at most ``size`` bytes: its transcript and ``subagents`` subagent
    files. ``real``: lines of a real session; ``args``: calls with 64 KiB inputs (kept whole)."""
    main = (REAL / f"{SESSION}.jsonl").read_bytes()
    (folder / f"{SESSION}.jsonl").parent.mkdir(parents=True, exist_ok=True)
    (folder / f"{SESSION}.jsonl").write_bytes(main)
    if shape == "real":
        lines = (REAL / SESSION / "subagents" / "agent-aac57f5.jsonl").read_bytes().splitlines()
    else:
        call = {"parentUuid": None, "isSidechain": True, "sessionId": SESSION, "type": "assistant", "uuid": "u",
                "message": {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_", "name": "Write",
                     "input": {"file_path": "/x", "content": "x" * 65536}}]}}
        lines = [json.dumps(call).encode()]
    each = (size - len(main)) // subagents
    for k in range(subagents):
        _fill(folder / SESSION / "subagents" / f"agent-a{k:06x}.jsonl", lines, each)
    return folder


def tiny_calls_session(folder: Path, calls: int) -> Path:
    """A Claude Code session of ``calls`` tool calls of 19 bytes each, 1,000 to a line."""
    block = b'{"type":"tool_use"}'
    head = (b'{"parentUuid":null,"type":"assistant","sessionId":"s","uuid":"u","timestamp":"2026-05-01T00:00:00Z",'
            b'"message":{"role":"assistant","content":[')
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "s.jsonl", "wb") as fh:
        for start in range(0, calls, 1000):
            fh.write(head + b",".join([block] * min(1000, calls - start)) + b"]}}\n")
    return folder


def ghaw_run(folder: Path, size: int, line_bytes: int = 1024) -> Path:
    """A gh-aw run whose gateway log (tool calls with ``line_bytes``-byte lines) is ``size`` bytes."""
    (folder / "mcp-logs").mkdir(parents=True, exist_ok=True)
    (folder / "aw_info.json").write_text(json.dumps({"workflow_name": "wf", "run_id": 1,
                                                     "created_at": "2026-05-01T00:00:00Z"}))
    (folder / "agent_output.json").write_text('{"items": []}')
    pad = "p" * max(0, line_bytes - 80)
    line = json.dumps({"type": "tool_call", "tool_name": "search", "server": "s", "pad": pad}).encode() + b"\n"
    (folder / "mcp-logs" / "gateway.jsonl").write_bytes(line * (size // len(line)))
    return folder
