"""Tool calls of a run: gateway records, native Copilot events, and their merge (docs/reference/graders.md §5)."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from operator import attrgetter
from typing import Any, Final

from graders.jsrt.jscompat import UNDEFINED, is_record, js_trim, js_truthy, stable_stringify
from graders.jsrt.records import EventData, EventRecord


def _js_or(*values: Any) -> Any:
    """``a || b || c``."""
    for v in values[:-1]:
        if js_truthy(v):
            return v
    return values[-1]


# What a failed call is: the tool-success-rate grader and the trace rules' steps agree on it
# (both inline these tests in their per-call loops, held to this function by property tests).
FAILED_STATUSES: Final = ("error", "failure")


def is_tool_failure(call: Any) -> bool:
    """Failed, unfinished (``completed: false``), error status, or carrying an ``error``."""
    if not isinstance(call, dict):
        return False
    return (
        call.get("success") is False
        or call.get("completed") is False
        or call.get("status") in FAILED_STATUSES
        or "error" in call
    )


def is_gateway_tool_call(entry: Any) -> bool:
    if not is_record(entry):
        return False
    payload = entry.get("payload")
    return (
        entry.get("type") == "tool_call"
        or entry.get("method") == "tools/call"
        or entry.get("event") == "tool_call"
        or isinstance(entry.get("tool_name"), str)
        or (is_record(payload) and isinstance(payload.get("tool_name"), str))
    )


def gateway_tool_call(entry: dict[str, Any], in_place: bool = False) -> dict[str, Any]:
    """The record plus normalized ``name``, ``tool``, ``arguments``, ``mcpServerName``.

    ``{...entry, name, tool, arguments}`` where an ``undefined`` value drops the key, as
    JSON serialization does (the spread keeps the record's key order). ``in_place`` updates
    ``entry`` itself instead of a copy (for a record nothing else references).
    """
    get = entry.get
    payload = get("payload")
    if not isinstance(payload, dict):
        payload = None
    params = payload.get("params") if payload is not None else None
    if not isinstance(params, dict):
        params = None
    rpc_name = params.get("name", UNDEFINED) if params is not None else UNDEFINED
    if not isinstance(rpc_name, str):
        rpc_name = UNDEFINED
    tool_name: Any = get("tool_name")
    if not isinstance(tool_name, str):
        tool_name = payload.get("tool_name") if payload is not None else None
        if not isinstance(tool_name, str):
            tool_name = rpc_name
    if payload is None:
        args: Any = UNDEFINED
    else:
        args = payload.get("arguments", UNDEFINED)
        if args is None or args is UNDEFINED:
            if params is not None and rpc_name is not UNDEFINED:
                args = params.get("arguments", UNDEFINED)
            else:
                args = payload.get("params", UNDEFINED)
    own_args = get("arguments", UNDEFINED)
    server = get("mcpServerName", UNDEFINED)
    if server is None or server is UNDEFINED:
        server = get("server_id", UNDEFINED)
    own_tool = get("tool", UNDEFINED)
    # ``tool || tool_name`` and ``name || tool || tool_name``: a gateway record has neither
    # ``name`` nor ``tool`` as a rule, which needs no truthiness test (once per call of a run).
    tool = tool_name if own_tool is UNDEFINED else _js_or(own_tool, tool_name)
    own_name = get("name", UNDEFINED)
    name = tool if own_name is UNDEFINED else _js_or(own_name, tool)
    if own_args is not None and own_args is not UNDEFINED:
        args = own_args
    call = entry if in_place else dict(entry)
    # name, tool, arguments in this order (unrolled: once per gateway call of every run).
    if name is UNDEFINED:
        call.pop("name", None)
    else:
        call["name"] = name
    if tool is UNDEFINED:
        call.pop("tool", None)
    else:
        call["tool"] = tool
    if args is UNDEFINED:
        call.pop("arguments", None)
    else:
        call["arguments"] = args
    if isinstance(server, str) and server:
        call["mcpServerName"] = server
    return call


_EMPTY_DATA = EventData()
_ARGUMENT_FIELDS = tuple(attrgetter(k) for k in ("input", "arguments", "parameters", "args", "toolInput"))


def _native_arguments(data: EventData) -> Any:
    for field in _ARGUMENT_FIELDS:
        candidate = field(data)
        if isinstance(candidate, (dict, list)):
            return candidate
        if isinstance(candidate, str) and js_trim(candidate):
            return candidate
    command = data.command
    if isinstance(command, str) and command != "":
        return {"command": command}
    return UNDEFINED


def _add_identity(call: dict[str, Any], tool_call_id: str, server: str, mcp_tool: Any, timestamp: Any) -> None:
    """The optional identity keys of a native call, in the reference's key order."""
    if tool_call_id:
        call["toolCallId"] = tool_call_id
    if server:
        call["mcpServerName"] = server
    if isinstance(mcp_tool, str) and mcp_tool:
        call["mcpToolName"] = mcp_tool
    if isinstance(timestamp, str):
        call["timestamp"] = timestamp


def native_tool_calls(entries: Iterable[EventRecord | None]) -> list[dict[str, Any]]:
    """Copilot ``events.jsonl`` starts/completions joined by toolCallId, then FIFO by name.

    ``entries`` are the event lines' record views (``records.view`` of a parsed event).
    """
    calls: list[dict[str, Any]] = []
    by_call_id: dict[str, dict[str, Any]] = {}
    pending_by_name: dict[str, list[dict[str, Any]]] = {}

    # Field reads are inlined in this loop (same tests, same order): it runs once per event;
    # identity keys are built only for the calls that need them (_add_identity, inlined).
    for entry in entries:
        if entry is None:
            continue
        etype = entry.type
        # Only starts and completions matter; other events (messages, …) are most of the log.
        is_start = etype == "tool.execution_start"
        if not is_start and etype != "tool.execution_complete":
            continue
        data = entry.data
        if data is None:
            data = _EMPTY_DATA
        tool_call_id = data.toolCallId
        if not isinstance(tool_call_id, str):
            tool_call_id = ""
        server = data.mcpServerName
        if not isinstance(server, str):
            server = ""
        name = data.toolName
        if not isinstance(name, str):
            name = ""

        if is_start:
            if not name:
                continue
            call: dict[str, Any] = {"source": "agent", "name": name, "tool": name, "completed": False}
            # Most starts carry their arguments as an object and no ``input``: no other field is read.
            args = data.arguments
            if data.input is not None or type(args) is not dict:
                args = _native_arguments(data)
            if args is not UNDEFINED:
                call["arguments"] = args
            if tool_call_id:
                call["toolCallId"] = tool_call_id
            if server:
                call["mcpServerName"] = server
            mcp_tool = data.mcpToolName
            if isinstance(mcp_tool, str) and mcp_tool:
                call["mcpToolName"] = mcp_tool
            timestamp = entry.timestamp
            if isinstance(timestamp, str):
                call["timestamp"] = timestamp
            calls.append(call)
            if tool_call_id:
                by_call_id[tool_call_id] = call
            queue = pending_by_name.get(name)
            if queue is None:
                pending_by_name[name] = [call]
            else:
                queue.append(call)
            continue

        success = data.success is True
        match = by_call_id.get(tool_call_id) if tool_call_id else None
        if match is None:
            queue = pending_by_name.get(name) if name else None
            if queue:
                match = queue.pop(0)
        else:
            # A call in by_call_id was made by a start above: its name is a string.
            queue = pending_by_name.get(match["name"])
            if queue:
                if queue[0] is match:  # completions mostly come in start order
                    del queue[0]
                else:
                    for i, pending in enumerate(queue):
                        if pending is match:
                            del queue[i]
                            break
        if match is None:
            if not name:
                continue
            match = {"source": "agent", "name": name, "tool": name}
            _add_identity(match, tool_call_id, server, data.mcpToolName, entry.timestamp)
            calls.append(match)
        if tool_call_id:
            match["toolCallId"] = tool_call_id
            by_call_id.pop(tool_call_id, None)
        match["completed"] = True
        match["success"] = success
        match["status"] = "success" if success else "error"
        if not success and is_record(data.error):
            match["error"] = data.error
    return calls


def _norm_name(name: Any) -> str:
    return js_trim(name).lower() if isinstance(name, str) else ""


def _alias_names(name: Any, tool: Any, tool_name: Any, mcp_tool: str, server_raw: Any) -> tuple[str, ...]:
    """Normalized names a call may appear under, in the reference's order, without repeats."""
    server = _norm_name(server_raw)
    bare_names = (name, tool, tool_name, mcp_tool)
    names: list[Any] = list(bare_names)
    if server:
        for bare in bare_names:
            n = _norm_name(bare)
            if not n:
                continue
            names += [f"{server}-{n}", f"{server}__{n}", f"mcp__{server}__{n}"]
            for sep in ("-", "__"):
                prefix = f"{server}{sep}"
                if n.startswith(prefix):
                    names.append(n[len(prefix) :])
            if n.startswith(f"mcp__{server}__"):
                names.append(n[len(f"mcp__{server}__") :])
    out: dict[str, None] = {}
    for raw in names:
        n = _norm_name(raw)
        if n:
            out[n] = None
    return tuple(out)


# Runs call a handful of tools thousands of times: the alias list depends only on the name
# fields, so it is computed once per distinct spelling (typed: True and 1 stay distinct).
_cached_alias_names = functools.lru_cache(maxsize=8192, typed=True)(_alias_names)


def _call_names(call: dict[str, Any]) -> tuple[str, ...]:
    """The normalized names a call may appear under (the name half of its dedupe keys)."""
    get = call.get
    mcp_tool = get("mcpToolName")
    fields = (get("name"), get("tool"), get("tool_name"), mcp_tool if isinstance(mcp_tool, str) else "",
              get("mcpServerName"))
    try:
        return _cached_alias_names(*fields)
    except TypeError:  # an unhashable (non-string) name field: nothing to cache
        return _alias_names(*fields)


def dedupe_keys(call: dict[str, Any]) -> list[str]:
    """All spellings under which a call may appear (name aliases x key-sorted arguments)."""
    args_key = stable_stringify(call.get("arguments", UNDEFINED))
    return [f"{n}|{args_key}" for n in _call_names(call)]


def merge_tool_calls(native: list[dict[str, Any]], gateway: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Native calls first, then gateway calls that do not duplicate an unconsumed native call.

    A gateway call duplicates the first unconsumed native call sharing one of its
    :func:`dedupe_keys`, tried in key order. A key is a name and the arguments' text, so the
    native calls are indexed by name first and their arguments are written out only for the
    names some gateway call has (most calls of a large run never meet a namesake; writing
    every call's arguments was most of the merge's time).
    """
    if not native:
        return gateway
    by_name: dict[str, list[int]] = {}
    for i, call in enumerate(native):
        for name in _call_names(call):
            by_name.setdefault(name, []).append(i)
    args_keys: dict[int, str] = {}
    # Per name, its native calls grouped by arguments text, in call order; built on first use.
    buckets: dict[str, dict[str, list[int]]] = {}
    consumed: set[int] = set()
    # Per (name, arguments), the position of its first possibly unconsumed native call:
    # consumption only grows, so skipping consumed entries once keeps repeats linear.
    cursor: dict[tuple[str, str], int] = {}
    merged = list(native)
    for call in gateway:
        names = [n for n in _call_names(call) if n in by_name]
        duplicate = False
        if names:
            args_key = stable_stringify(call.get("arguments", UNDEFINED))
            for name in names:
                by_args = buckets.get(name)
                if by_args is None:
                    by_args = buckets[name] = {}
                    for i in by_name[name]:
                        key = args_keys.get(i)
                        if key is None:
                            key = args_keys[i] = stable_stringify(native[i].get("arguments", UNDEFINED))
                        by_args.setdefault(key, []).append(i)
                bucket = by_args.get(args_key)
                if not bucket:
                    continue
                pos = cursor.get((name, args_key), 0)
                while pos < len(bucket) and bucket[pos] in consumed:
                    pos += 1
                cursor[(name, args_key)] = pos
                if pos == len(bucket):
                    continue
                consumed.add(bucket[pos])
                duplicate = True
                break
        if not duplicate:
            merged.append(call)
    return merged
