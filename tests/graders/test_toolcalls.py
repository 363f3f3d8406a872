"""The tool-call merge against its definition: keys tried in order, first unconsumed native wins."""

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from graders.formats.ghaw.toolcalls import (
    _EMPTY_DATA,
    _add_identity,
    _native_arguments,
    dedupe_keys,
    merge_tool_calls,
)
from graders.jsrt.jscompat import UNDEFINED, is_record, js_truthy


def reference_merge(native: list[dict[str, Any]], gateway: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """docs/reference/graders.md §5 as written: index every native call under every dedupe key."""
    index: dict[str, list[int]] = {}
    for i, call in enumerate(native):
        for key in dedupe_keys(call):
            index.setdefault(key, []).append(i)
    consumed: set[int] = set()
    merged = list(native)
    for call in gateway:
        hit = next((i for key in dedupe_keys(call) for i in index.get(key, []) if i not in consumed), None)
        if hit is None:
            merged.append(call)
        else:
            consumed.add(hit)
    return merged


# Few distinct spellings, so that names, aliases and arguments collide often; "|" and the
# separators the aliases use are in the alphabet on purpose.
_names = st.sampled_from(["view", "View ", "github-view", "mcp__github__view", "a|b", "a", "", "gh__x"])
_args = st.one_of(
    st.none(),
    st.sampled_from(["b|{}", "{}", "x", ""]),
    st.dictionaries(st.sampled_from(["a", "b", "b|"]), st.sampled_from([1, "1", "|", None]), max_size=2),
    st.lists(st.sampled_from([1, "|{}"]), max_size=2),
)


@st.composite
def _call(draw: Any) -> dict[str, Any]:
    call: dict[str, Any] = {}
    for key in ("name", "tool", "tool_name", "mcpToolName"):
        if draw(st.booleans()):
            call[key] = draw(st.one_of(_names, st.integers(0, 2)))
    if draw(st.booleans()):
        call["mcpServerName"] = draw(st.sampled_from(["github", "GitHub", "a", ""]))
    if draw(st.booleans()):
        call["arguments"] = draw(_args)
    return call


@settings(max_examples=400, deadline=None)
@given(st.lists(_call(), max_size=12), st.lists(_call(), max_size=12))
def test_merge_matches_its_definition(native: list[dict[str, Any]], gateway: list[dict[str, Any]]) -> None:
    merged = merge_tool_calls(native, gateway)
    expected = reference_merge(native, gateway)
    assert [id(c) for c in merged] == [id(c) for c in expected]


def test_a_gateway_call_consumes_one_native_namesake_each_time() -> None:
    native = [{"name": "view", "arguments": {"p": 1}}, {"name": "view", "arguments": {"p": 1}}]
    gateway = [{"tool_name": "view", "arguments": {"p": 1}} for _ in range(3)] + [{"name": "edit"}]
    merged = merge_tool_calls(native, gateway)
    assert merged[:2] == native
    assert merged[2:] == [gateway[2], gateway[3]]


def test_arguments_are_compared_key_sorted() -> None:
    native = [{"name": "view", "mcpServerName": "github", "arguments": {"a": 1, "b": 2}}]
    gateway = [{"name": "github-view", "arguments": {"b": 2, "a": 1}}]
    assert merge_tool_calls(native, gateway) == native


_falsy_or_not = st.one_of(st.none(), st.sampled_from(["", "view", 0, 1, False, True]))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["name", "tool", "tool_name"]), _falsy_or_not))
def test_gateway_call_names_are_the_references_or_chains(fields: dict[str, Any]) -> None:
    from graders.formats.ghaw.toolcalls import gateway_tool_call
    from graders.jsrt.jscompat import UNDEFINED, js_truthy

    def js_or(*values: Any) -> Any:
        return next((v for v in values[:-1] if js_truthy(v)), values[-1])

    tool_name = fields.get("tool_name") if isinstance(fields.get("tool_name"), str) else UNDEFINED
    tool = js_or(fields.get("tool", UNDEFINED), tool_name)
    name = js_or(fields.get("name", UNDEFINED), fields.get("tool", UNDEFINED), tool_name)
    call = gateway_tool_call(dict(fields))
    assert call.get("tool", UNDEFINED) == tool and call.get("name", UNDEFINED) == name


# --- native calls: the inlined join against its plain transcription ----------------------------

def reference_native_calls(entries: list[Any]) -> list[dict[str, Any]]:
    """The join as it was first written (kept as the definition the inlined loop is held to)."""
    calls: list[dict[str, Any]] = []
    by_call_id: dict[str, dict[str, Any]] = {}
    pending_by_name: dict[str, list[dict[str, Any]]] = {}

    # Field reads are inlined in this loop (same tests, same order): it runs once per event;
    # identity keys are built only for the calls that need them.
    for entry in entries:
        if entry is None:
            continue
        etype = entry.type
        # Only starts and completions matter; other events (messages, …) are most of the log.
        if etype != "tool.execution_start" and etype != "tool.execution_complete":
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
        mcp_tool = data.mcpToolName

        if etype == "tool.execution_start":
            if not name:
                continue
            call: dict[str, Any] = {"source": "agent", "name": name, "tool": name, "completed": False}
            args = _native_arguments(data)
            if args is not UNDEFINED:
                call["arguments"] = args
            _add_identity(call, tool_call_id, server, mcp_tool, entry.timestamp)
            calls.append(call)
            if tool_call_id:
                by_call_id[tool_call_id] = call
            pending_by_name.setdefault(name, []).append(call)
            continue

        success = data.success is True
        match = by_call_id.get(tool_call_id) if tool_call_id else None
        if match is None:
            queue = pending_by_name.get(name) if name else None
            if queue:
                match = queue.pop(0)
        else:
            key = match["name"] if isinstance(match.get("name"), str) else name
            queue = pending_by_name.get(key)
            if queue:
                for i, pending in enumerate(queue):
                    if pending is match:
                        del queue[i]
                        break
        if match is None:
            if not name:
                continue
            match = {"source": "agent", "name": name, "tool": name}
            _add_identity(match, tool_call_id, server, mcp_tool, entry.timestamp)
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



_ids = st.one_of(st.sampled_from(["c1", "c2", "c3", "c1", "c2", ""]), st.none(), st.just(7))
_tool_names = st.one_of(st.sampled_from(["bash", "view", "bash", "view", ""]), st.none(), st.just(3))
_args = st.one_of(st.none(), st.just({"path": "a"}), st.just({"cmd": "b"}), st.just([1]),
                  st.sampled_from(["", " ", "ls"]), st.just(0))
_event_data = st.one_of(st.none(), st.just([1]), st.fixed_dictionaries({"toolName": _tool_names}, optional={
    "toolCallId": _ids, "mcpServerName": st.sampled_from(["github", "", None]),
    "mcpToolName": st.sampled_from(["get_issue", "", None, 1]), "input": _args, "arguments": _args,
    "parameters": _args, "args": _args, "toolInput": _args, "command": st.sampled_from(["make", "", None]),
    "success": st.sampled_from([True, False, None, 1]), "error": st.sampled_from([None, {"message": "x"}, "boom"]),
}), st.fixed_dictionaries({"toolName": _tool_names, "toolCallId": _ids, "input": _args, "arguments": _args,
                            "success": st.sampled_from([True, False])}))
_events = st.lists(st.one_of(st.just([1]), st.fixed_dictionaries(
    {"type": st.sampled_from(["tool.execution_start", "tool.execution_complete"] * 3 + ["assistant.message", None])},
    optional={"data": _event_data, "timestamp": st.sampled_from(["2026-01-01T00:00:00Z", None, 5])})), max_size=25)


def _start(call_id: str, name: str, **data: Any) -> dict[str, Any]:
    return {"type": "tool.execution_start", "data": {"toolCallId": call_id, "toolName": name, **data}}


@settings(max_examples=400, deadline=None)
@given(_events)
@example([_start("c1", "bash", input={"x": 1}, arguments={"path": "a"})])  # input comes first
@example([_start("c1", "bash"), _start("c2", "bash"),  # completed out of start order, then by name
          {"type": "tool.execution_complete", "data": {"toolCallId": "c2", "success": True}},
          {"type": "tool.execution_complete", "data": {"toolName": "bash", "success": False}}])
def test_native_calls_join_as_their_plain_transcription(events: list[Any]) -> None:
    import copy

    from graders.formats.ghaw.toolcalls import native_tool_calls
    from graders.jsrt.records import EventRecord, view

    records = [view(EventRecord, copy.deepcopy(e)) for e in events]
    want = reference_native_calls([view(EventRecord, copy.deepcopy(e)) for e in events])
    got = native_tool_calls(records)
    assert [list(c.items()) for c in got] == [list(c.items()) for c in want]


# --- gateway calls: the unrolled normalization against its first transcription -----------------


def _reference_js_or(*values: Any) -> Any:
    return next((v for v in values[:-1] if js_truthy(v)), values[-1])


def reference_gateway_call(entry: dict[str, Any], in_place: bool = False) -> dict[str, Any]:
    """The gateway call as it was first written (the definition the unrolled one is held to)."""
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
    tool = tool_name if own_tool is UNDEFINED else _reference_js_or(own_tool, tool_name)
    own_name = get("name", UNDEFINED)
    name = tool if own_name is UNDEFINED else _reference_js_or(own_name, tool)
    call = entry if in_place else dict(entry)
    for key, value in (
        ("name", name),
        ("tool", tool),
        ("arguments", own_args if own_args is not None and own_args is not UNDEFINED else args),
    ):
        if value is UNDEFINED:
            call.pop(key, None)
        else:
            call[key] = value
    if isinstance(server, str) and server:
        call["mcpServerName"] = server
    return call



_field = st.one_of(st.none(), st.sampled_from(["", "view", "github", 0, 1, False, True]), st.just({"k": 1}))
_payload = st.one_of(_field, st.fixed_dictionaries({}, optional={
    "tool_name": _field, "arguments": _field, "params": st.one_of(_field, st.fixed_dictionaries(
        {}, optional={"name": _field, "arguments": _field}))}))
_gateway_entries = st.fixed_dictionaries({}, optional={
    "type": st.just("tool_call"), "name": _field, "tool": _field, "tool_name": _field, "arguments": _field,
    "payload": _payload, "mcpServerName": _field, "server_id": _field, "level": st.just("info")})


@settings(max_examples=400, deadline=None)
@given(_gateway_entries, st.booleans())
@example({"tool_name": "view", "payload": {"arguments": {"k": 1}}}, True)  # name, tool, arguments: all new keys
@example({"arguments": None, "name": "", "payload": {"params": {"name": "x", "arguments": 1}}}, False)
def test_gateway_calls_are_their_first_transcriptions(entry: dict[str, Any], in_place: bool) -> None:
    import copy

    from graders.formats.ghaw.toolcalls import gateway_tool_call

    want = reference_gateway_call(copy.deepcopy(entry), in_place)
    given_entry = copy.deepcopy(entry)
    got = gateway_tool_call(given_entry, in_place)
    assert list(got.items()) == list(want.items())
    assert (got is given_entry) == in_place
