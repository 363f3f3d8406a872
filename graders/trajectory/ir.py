"""Where the trajectory graders find the Trajectory IR, and the sequences they derive from it.

gh-aw's ``trajectory_graders.cjs`` (graders.md §7) has no single IR object: every grader
searches a list of candidate records in priority order and takes the first that has the
collections it needs. This module holds that search, the global 5,000-item cap, and the
two orderings shared by several graders (canonical state visits, event symbols).

Deliberate deviation (docs/deviations-trajectory.md): the reference never reads
``<root>/agent/graders/trajectory_ir.json``. When the run has that file we read it and use it
as the *last* candidate (``GraderContext.file_ir``), after every embedded one, so runs whose
IR is embedded grade exactly as in gh-aw. The cap also scans that file.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

from graders.jscompat import UNDEFINED, is_record, js_key_order, js_number
from graders.registry import GraderContext, per_run

Trace = dict[str, Any]
Record = dict[str, Any]
Raw = Any

MAX_TRAJECTORY_ITEMS: Final = 5000
_MAX_SAFE: Final = 2**53
IR_COLLECTION_KEYS: Final = (
    "events", "states", "actions", "toolCalls", "observations", "resources",
    "provenanceEdges", "objectives", "outputs",
)
_AGENT_OUTPUT_KEYS: Final = ("trajectoryIR", "trajectoryIr", "trajectory")


def get(obj: Any, key: str) -> Any:
    """``obj[key]`` for a record, ``undefined`` otherwise (JSON data has no prototype keys we read)."""
    return obj.get(key, UNDEFINED) if isinstance(obj, dict) else UNDEFINED


def candidates(trace: Trace, ctx: GraderContext | None, include_trace: bool) -> list[Record]:
    """Candidate IR records in priority order (only records count).

    ``include_trace`` puts the preprocessed trace itself first, as twelve of the graders do.
    Searched once per run (every trajectory grader of the run asks); each caller gets its own list.
    """
    found = per_run(ctx, trace, ("trajectory.candidates", include_trace),
                    lambda: _candidates(trace, ctx, include_trace))
    return list(found)


def _candidates(trace: Trace, ctx: GraderContext | None, include_trace: bool) -> list[Record]:
    agent_output = get(trace, "agentOutput")
    ao = agent_output if is_record(agent_output) else None
    raw: list[Any] = [trace] if include_trace else []
    raw += [get(trace, "trajectoryIR"), get(trace, "trajectoryIr"), get(trace, "ir")]
    raw += [get(ao, k) for k in _AGENT_OUTPUT_KEYS] + [ao]
    if ctx is not None and is_record(ctx.file_ir):
        raw.append(ctx.file_ir)  # our deviation: the IR file is the last resort
    return [c for c in raw if is_record(c)]


def oversized_collection(trace: Trace, ctx: GraderContext | None) -> str | None:
    """The first IR collection longer than the cap, as ``<key>`` or ``reference.<key>``.

    Scans every candidate, the trace included, except the trace's own preprocessed
    ``toolCalls`` (graders only scan that list linearly). Once per run, like :func:`candidates`.
    """
    if not is_record(trace):
        return None
    return per_run(ctx, trace, "trajectory.oversized", lambda: _oversized_collection(trace, ctx))


def _oversized_collection(trace: Trace, ctx: GraderContext | None) -> str | None:
    for cand in [trace, *candidates(trace, ctx, include_trace=False)]:
        for key in IR_COLLECTION_KEYS:
            if cand is trace and key == "toolCalls":
                continue
            value = cand.get(key)
            if isinstance(value, list) and len(value) > MAX_TRAJECTORY_ITEMS:
                return key
        reference = cand.get("reference")
        if isinstance(reference, dict):
            for key in js_key_order(reference):
                value = reference[key]
                if isinstance(value, list) and len(value) > MAX_TRAJECTORY_ITEMS:
                    return f"reference.{key}"
            patch = reference.get("patch")
            if isinstance(patch, dict):
                files = patch.get("files")
                if isinstance(files, list) and len(files) > MAX_TRAJECTORY_ITEMS:
                    return "reference.patch.files"
    return None


TrajectoryFn = Callable[[Trace, Record, GraderContext], Raw]


def with_limits(fn: TrajectoryFn) -> Callable[[Trace, GraderContext], Raw]:
    """Apply the global cap before ``fn``; a non-record ``config`` is treated as ``{}``."""

    def grader(trace: Trace, ctx: GraderContext) -> Raw:
        oversized = oversized_collection(trace, ctx)
        if oversized is not None:
            return unavailable(f"unavailable: {oversized} exceeds {MAX_TRAJECTORY_ITEMS} items")
        config = ctx.config if is_record(ctx.config) else {}
        return fn(trace, config, ctx)

    grader.__name__ = fn.__name__
    grader.__doc__ = fn.__doc__
    return grader


def unavailable(message: str) -> Raw:
    """The reference's "no value" result; normalization makes it ``status: unavailable``."""
    return {"value": None, "passed": None, "message": message}


def first_with(cands: list[Record], *keys: str) -> Record | None:
    """The first candidate whose every ``key`` is an array."""
    for cand in cands:
        if all(isinstance(cand.get(k), list) for k in keys):
            return cand
    return None


def first_with_record(cands: list[Record], key: str) -> Record | None:
    """The first candidate whose ``key`` array holds at least one record."""
    for cand in cands:
        value = cand.get(key)
        if isinstance(value, list) and any(is_record(v) for v in value):
            return cand
    return None


def records(value: Any) -> list[Record]:
    return [v for v in value if is_record(v)] if isinstance(value, list) else []


def non_empty_str(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def _finite_number(value: Any) -> float | int | None:
    """``Number(value)`` when finite, else None."""
    if type(value) is int and -_MAX_SAFE <= value <= _MAX_SAFE:
        return value  # the common case, without the general conversion
    n = js_number(value)
    return n if math.isfinite(n) else None


class StateVisit:
    """One canonical state visit: its id, sort key and the ``firstEventIndex`` shown in details."""

    __slots__ = ("event_index", "id", "order")

    def __init__(self, id: str, order: float | int, event_index: float | int | None) -> None:
        self.id = id
        self.order = order
        self.event_index = event_index


def state_visits(cands: list[Record]) -> list[StateVisit]:
    """Canonical state visits in execution order (REP and the RQA graders).

    ``states`` and ``events`` come from the first candidate with a ``states`` array. A state
    record sorts by the array position of the event whose ``index`` equals its
    ``firstEventIndex``, else by that index itself, else by its own position; a plain string
    sorts by position. Mixing those sources is the reference's ordering quirk, kept on purpose.
    """
    cand = first_with(cands, "states")
    if cand is None:
        return []
    states = cand["states"]
    raw_events = cand.get("events")
    events: list[Any] = raw_events if isinstance(raw_events, list) else []
    event_position: dict[float | int, int] = {}
    for i, event in enumerate(events):
        if is_record(event):
            index = _finite_number(event.get("index", UNDEFINED))
            if index is not None:
                event_position[index] = i  # later duplicates win, as Map.set does
    visits: list[StateVisit] = []
    for position, state in enumerate(states):
        if isinstance(state, str):
            visits.append(StateVisit(state, position, None))
            continue
        if not is_record(state) or not non_empty_str(state.get("id")):
            continue
        first = _finite_number(state.get("firstEventIndex", UNDEFINED))
        if first is None:
            visits.append(StateVisit(state["id"], position, None))
        elif first in event_position:
            visits.append(StateVisit(state["id"], event_position[first], first))
        else:
            visits.append(StateVisit(state["id"], first, first))
    visits.sort(key=lambda v: v.order)  # stable, like V8's Array.prototype.sort
    return visits


def event_symbols(cands: list[Record]) -> list[str]:
    """Event symbols sorted by ``Number(index)`` (array position when not finite).

    ``tool_call`` events with a non-empty string ``ref`` become ``tool_call:<ref>``; every other
    event with a non-empty string ``kind`` is its kind.
    """
    cand = first_with(cands, "events")
    if cand is None:
        return []
    keyed: list[tuple[float | int, str]] = []
    for position, event in enumerate(cand["events"]):
        if not is_record(event) or not non_empty_str(event.get("kind")):
            continue
        index = _finite_number(event.get("index", UNDEFINED))
        kind = event["kind"]
        ref = event.get("ref")
        symbol = f"tool_call:{ref}" if kind == "tool_call" and non_empty_str(ref) else kind
        keyed.append((position if index is None else index, symbol))
    keyed.sort(key=lambda e: e[0])
    return [symbol for _, symbol in keyed]
