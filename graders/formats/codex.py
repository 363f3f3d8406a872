"""OpenAI Codex CLI, two formats (docs/formats.md §8.3).

* ``codex-exec``: ``codex exec --json`` events, the Codex engine's stdout in a gh-aw run
  (``thread.started``, ``turn.started|completed|failed``, ``item.started|updated|completed`` with
  item types ``command_execution``, ``mcp_tool_call``, ``file_change``, ``web_search``,
  ``collab_tool_call``, …, top-level ``error``). An item is one call per (thread, item id); its
  last record says how it ended.
* ``codex-rollout``: the session files the CLI keeps (``~/.codex/sessions/…/rollout-*.jsonl``):
  ``session_meta``, ``turn_context``, ``response_item`` (``function_call``/``custom_tool_call``/
  ``local_shell_call``/``web_search_call`` and their outputs, joined by ``call_id``), ``event_msg``
  (``token_count``, ``exec_command_end``, ``patch_apply_end``, ``mcp_tool_call_end``, …), across
  CLI generations: shell calls whose output is JSON with ``metadata.exit_code``; ``exec_command`` /
  ``write_stdin`` whose output text says ``Process exited with code N``; outputs that say the
  command could not run (``exec_command failed …``, ``failed to …``, a sandbox refusal). The
  oldest files (2025) hold bare response items after a ``{id, timestamp, instructions}`` header.
"""

from __future__ import annotations

import re
from typing import Any

from graders.formats.session import (
    CallBook,
    LineFormat,
    Session,
    Source,
    TokenTotals,
    Usage,
    as_dict,
    count,
    error_text,
    json_lines,
    kind_of,
    stated,
    text,
)
from graders.grading.registry import input_format
from graders.jsrt.jsonio import JsonError, parse_json

EXEC = "codex-exec"
ROLLOUT = "codex-rollout"

# ---- what an output says about its call ---------------------------------------------------------

_EXITED = re.compile(r"(?:Process exited with code|^Exit code:)\s*(-?\d+)", re.MULTILINE)
# The command never ran: the tool's own failure, or a refusal by the sandbox or the approval policy.
_COULD_NOT_RUN = re.compile(r"^(?:[\w.-]+ failed\b|failed to\b|execution error\b|error: command (?:was )?rejected)"
                            r"|sandbox\s*\(?\s*denied|rejected by (?:the )?user|approval required by policy",
                            re.IGNORECASE)


def output_failure(output: Any) -> str | None:
    """Why a call's output says it failed, or None: a JSON output whose ``metadata.exit_code`` is
    not 0 (or ``success: false``), a ``Process exited with code N`` / ``Exit code: N`` with N not
    0, or a text saying the command could not run (its tool failed, the sandbox refused it)."""
    if isinstance(output, dict):
        if output.get("success") is False:
            return error_text(output.get("content")) or "success: false"
        output = output.get("content", output.get("output"))
    if not isinstance(output, str):
        return None
    body = output.strip()
    if body.startswith("{"):
        try:
            doc = parse_json(body)
        except JsonError:
            doc = None
        if isinstance(doc, dict):
            code = as_dict(doc.get("metadata")).get("exit_code")
            if isinstance(code, int) and not isinstance(code, bool) and code != 0:
                return f"exit code {code}: {str(doc.get('output') or '')[:150]}"
            if doc.get("success") is False:
                return "success: false"
            return None
    exited = _EXITED.search(body[:2000])
    if exited:
        return None if exited.group(1) == "0" else f"exit code {exited.group(1)}"
    first = body.split("\n", 1)[0][:300]
    return first if _COULD_NOT_RUN.search(first) else None


# ---- codex exec --json ----------------------------------------------------------------------------

_EXEC_TYPES = frozenset({"thread.started", "turn.started", "turn.completed", "turn.failed", "item.started",
                         "item.updated", "item.completed", "error"})
# Items that are no tool call: the agent's text, its reasoning, its plan, an error notice.
_NOT_CALLS = frozenset({"agent_message", "reasoning", "todo_list", "error"})
_FAILED = frozenset({"failed", "declined", "error", "cancelled", "canceled"})


def exec_record(o: dict[str, Any]) -> bool:
    kind = kind_of(o)
    if kind == "thread.started":
        return isinstance(o.get("thread_id"), str)
    return kind in _EXEC_TYPES and kind != "error" and (not (kind or "").startswith("item.") or isinstance(o.get("item"), dict))


def _item_name(item: dict[str, Any]) -> tuple[str, Any, str | None]:
    """(name, arguments, MCP server) of a tool item."""
    kind = str(item.get("type") or "")
    if kind == "command_execution":
        return "command_execution", {"command": item.get("command")}, None
    if kind == "mcp_tool_call":
        server = text(item.get("server"))
        return str(item.get("tool") or kind), item.get("arguments"), server
    if kind == "web_search":
        return "web_search", {"query": item.get("query")}, None
    if kind == "file_change":
        return "file_change", {"changes": item.get("changes")}, None
    if kind == "collab_tool_call":
        return str(item.get("tool") or kind), {"prompt": item.get("prompt")}, None
    return kind, {}, None


def _item_failure(item: dict[str, Any]) -> str | None:
    status = item.get("status")
    if isinstance(status, str) and status.lower() in _FAILED:
        return f"status {status}: " + (error_text(item.get("error")) or str(item.get("aggregated_output") or "")[:150])
    code = item.get("exit_code")
    if isinstance(code, int) and not isinstance(code, bool) and code != 0:
        return f"exit code {code}"
    if item.get("error"):
        return error_text(item.get("error")) or "error"
    if as_dict(item.get("result")).get("isError") is True:
        return "isError"
    return None


def read_exec(source: Source) -> list[Session]:
    session = Session(EXEC, source.name)
    book = CallBook()
    usage: list[Usage] = []
    errors = 0
    for _, o in json_lines(source, session.warnings):
        kind = kind_of(o)
        if kind is None or kind not in _EXEC_TYPES:
            session.skip(o.get("type"))
            continue
        if kind == "thread.started":
            session.run_id = session.run_id or text(o.get("thread_id"))
        elif kind == "turn.completed":
            u = as_dict(o.get("usage"))
            total, cached = count(u.get("input_tokens")), count(u.get("cached_input_tokens"))
            usage.append(Usage(None, max(0, total - cached), count(u.get("output_tokens")), cached,
                               count(u.get("cache_write_input_tokens")),
                               reasoning=stated(u.get("reasoning_output_tokens"))))
        elif kind in ("turn.failed", "error"):
            errors += 1
        elif kind.startswith("item."):
            item = as_dict(o.get("item"))
            if kind_of(item) in _NOT_CALLS:
                continue
            thread = text(item.get("sender_thread_id"))
            cid = text(item.get("id"))
            key = f"{thread}/{cid}" if thread and cid else cid
            agent = thread if thread and thread != session.run_id else None
            name, args, server = _item_name(item)
            call = book.start(key, name, args, agent, server)
            status = item.get("status")
            if kind == "item.completed" or (isinstance(status, str) and status not in ("in_progress", "")):
                why = _item_failure(item)
                if kind == "item.completed" or why is not None:
                    out = item.get("aggregated_output")
                    book.finish(call.call_id, why is None, why, out if isinstance(out, str) else "")
    session.calls = book.calls
    session.usage = usage
    session.tokens = TokenTotals.of_usage(usage, True, "sum of turn.completed usage")
    if errors:
        session.delivered = False
        session.status = "failed"
    elif usage:
        session.status = "completed"
    return [session]


# ---- rollout files --------------------------------------------------------------------------------

_ROLLOUT_TYPES = frozenset({"session_meta", "turn_context", "response_item", "event_msg", "compacted"})
_CALL_ITEMS = frozenset({"function_call", "custom_tool_call", "local_shell_call", "web_search_call",
                         "tool_search_call"})
_OUTPUT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output", "local_shell_call_output",
                           "tool_search_call_output"})
_OTHER_ITEMS = frozenset({"message", "reasoning", "ghost_snapshot", "compaction", "compaction_summary"})


def rollout_record(o: dict[str, Any]) -> bool:
    if kind_of(o) in _ROLLOUT_TYPES and isinstance(o.get("payload"), dict):
        return True
    # The oldest files: a header {id, timestamp, instructions[, git]} and {"record_type": "state"} lines.
    return o.get("record_type") == "state" or (
        "instructions" in o and isinstance(o.get("id"), str) and "timestamp" in o and "type" not in o)


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return parse_json(raw)
        except JsonError:
            return {"input": raw}
    return raw


class _Rollout:
    def __init__(self, source: Source) -> None:
        self.session = Session(ROLLOUT, source.name)
        self.book = CallBook()
        self.total: tuple[int, int, int] | None = None  # the last cumulative (input, cached, output)
        self.anonymous = 0
        self.model: str | None = None

    def item(self, p: dict[str, Any]) -> None:
        kind = kind_of(p)
        if kind in _CALL_ITEMS:
            cid = text(p.get("call_id")) or text(p.get("id"))
            if cid is None:  # a web search without an id: each record is its own call
                self.anonymous += 1
                cid = f"#{self.anonymous}"
            if kind == "local_shell_call":
                name, args = "local_shell", as_dict(p.get("action"))
            elif kind in ("web_search_call", "tool_search_call"):
                name, args = kind.removesuffix("_call"), as_dict(p.get("action"))
            else:
                name = str(p.get("name") or kind)
                args = _arguments(p.get("arguments", p.get("input")))
            call = self.book.start(cid, name, args)
            status = p.get("status")
            if kind in ("web_search_call", "tool_search_call", "local_shell_call") and isinstance(status, str) \
                    and status not in ("in_progress", "searching"):
                failed = status.lower() in _FAILED or status.lower() == "incomplete"
                self.book.finish(call.call_id, not failed, f"status {status}" if failed else None)
        elif kind in _OUTPUT_ITEMS:
            output = p.get("output")
            why = output_failure(output)
            shown = output if isinstance(output, str) else error_text(as_dict(output).get("content"))
            self.book.finish(text(p.get("call_id")), why is None, why, shown)
        elif kind not in _OTHER_ITEMS:
            self.session.skip(f"response_item:{kind}")

    def event(self, p: dict[str, Any]) -> None:
        kind = kind_of(p)
        cid = text(p.get("call_id"))
        if kind == "token_count":
            info = as_dict(p.get("info"))
            total, last = as_dict(info.get("total_token_usage")), as_dict(info.get("last_token_usage"))
            now = (count(total.get("input_tokens")), count(total.get("cached_input_tokens")),
                   count(total.get("output_tokens")))
            if total and now != self.total:  # repeated snapshots (rate-limit updates) add nothing
                self.total = now
                fresh, cached = count(last.get("input_tokens")), count(last.get("cached_input_tokens"))
                self.session.usage.append(Usage(self.model, max(0, fresh - cached), count(last.get("output_tokens")),
                                                cached, reasoning=stated(last.get("reasoning_output_tokens"))))
        elif kind == "patch_apply_end" and p.get("success") is False:
            self._fail(cid, "patch not applied: " + str(p.get("stderr") or "")[:150])
        elif kind == "mcp_tool_call_end" and "Err" in as_dict(p.get("result")):
            self._fail(cid, "MCP error: " + error_text(as_dict(p.get("result")).get("Err")))
        elif kind in ("turn_aborted", "error", "stream_error"):
            self.session.status = str(kind)
        elif kind == "task_complete" and self.session.status is None:
            self.session.status = "completed"

    def _fail(self, cid: str | None, why: str) -> None:
        call = self.book.get(cid)
        if call is not None and call.ok is not False:
            call.ok, call.error = False, why[:200]


def read_rollout(source: Source) -> list[Session]:
    r = _Rollout(source)
    s = r.session
    for _, o in json_lines(source, s.warnings):
        s.stamp(o.get("timestamp"))
        kind, p = kind_of(o), as_dict(o.get("payload"))
        if kind == "session_meta":
            s.run_id = s.run_id or text(p.get("id"))
            s.stamp(p.get("timestamp"))
            repo = as_dict(p.get("git")).get("repository_url")
            s.repository = s.repository or (text(repo) if isinstance(repo, str) and len(repo) < 200 else None)
        elif kind == "turn_context":
            r.model = text(p.get("model")) or r.model
        elif kind == "response_item":
            r.item(p)
        elif kind == "event_msg":
            r.event(p)
        elif kind == "compacted":
            continue
        elif o.get("record_type") == "state":
            continue
        elif o.get("type") is None and "instructions" in o:  # the oldest header
            s.run_id = s.run_id or text(o.get("id"))
        elif kind in _CALL_ITEMS or kind in _OUTPUT_ITEMS or kind in _OTHER_ITEMS:
            r.item(o)  # the oldest files: bare response items
        else:
            s.skip(o.get("type"))
    s.calls = r.book.calls
    if r.total is not None:
        inp, cached, out = r.total
        s.tokens = TokenTotals(inp, out, cached, 0, True, "last event_msg token_count total_token_usage")
    if s.status in ("turn_aborted", "error", "stream_error"):
        s.delivered = False
    return [s]


@input_format(EXEC)
class CodexExec(LineFormat):
    kind = EXEC
    engines = ("codex",)
    signature = staticmethod(exec_record)
    reader = staticmethod(read_exec)


@input_format(ROLLOUT)
class CodexRollout(LineFormat):
    kind = ROLLOUT
    suffixes = (".jsonl",)
    signature = staticmethod(rollout_record)
    reader = staticmethod(read_rollout)

    def sniff(self, name: str, head: bytes) -> bool:
        # A session_meta line longer than the sniffed head (its base instructions): its opening says what it is.
        return super().sniff(name, head) or (name.endswith(self.suffixes) and head.lstrip().startswith(b"{")
                                             and b'"type":"session_meta"' in head[:512])
