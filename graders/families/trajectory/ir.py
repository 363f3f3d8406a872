"""Where the trajectory graders find the Trajectory IR, and the sequences they derive from it.

gh-aw's ``trajectory_graders.cjs`` (docs/reference/graders.md §7) has no single IR object: every grader
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
from typing import Any, Final, TypeVar

from graders.grading.registry import GraderContext
from graders.jsrt.jscompat import UNDEFINED, is_record, js_key_order, js_number

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
    Searched once per run (the run's :class:`RunView`); each caller gets its own list.
    """
    return list(run_view(trace, ctx).candidates(include_trace))


def _candidates(trace: Trace, file_ir: Any, include_trace: bool) -> list[Record]:
    agent_output = get(trace, "agentOutput")
    ao = agent_output if is_record(agent_output) else None
    raw: list[Any] = [trace] if include_trace else []
    raw += [get(trace, "trajectoryIR"), get(trace, "trajectoryIr"), get(trace, "ir")]
    raw += [get(ao, k) for k in _AGENT_OUTPUT_KEYS] + [ao]
    if is_record(file_ir):
        raw.append(file_ir)  # our deviation: the IR file is the last resort
    return [c for c in raw if is_record(c)]


def oversized_collection(trace: Trace, ctx: GraderContext | None) -> str | None:
    """The first IR collection longer than the cap, as ``<key>`` or ``reference.<key>``.

    Scans every candidate, the trace included, except the trace's own preprocessed
    ``toolCalls`` (graders only scan that list linearly). Once per run (the run's view).
    """
    if not is_record(trace):
        return None
    return run_view(trace, ctx).oversized


def _oversized_collection(trace: Trace, cands: list[Record]) -> str | None:
    for cand in [trace, *cands]:
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


def _event_positions(events: list[Any]) -> dict[float | int, int]:
    """``Number(index)`` of each record event -> its array position (later duplicates win, as Map.set does)."""
    position: dict[float | int, int] = {}
    for i, event in enumerate(events):
        if isinstance(event, dict):
            index = event.get("index", UNDEFINED)
            if type(index) is not int or not -_MAX_SAFE <= index <= _MAX_SAFE:
                index = _finite_number(index)
                if index is None:
                    continue
            position[index] = i
    return position


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
    event_position = _event_positions(raw_events) if isinstance(raw_events, list) else {}
    visits: list[StateVisit] = []
    append = visits.append
    for position, state in enumerate(states):
        if isinstance(state, str):
            append(StateVisit(state, position, None))
            continue
        if not isinstance(state, dict):
            continue
        sid = state.get("id")
        if not isinstance(sid, str) or sid == "":
            continue
        raw = state.get("firstEventIndex", UNDEFINED)
        first = raw if type(raw) is int and -_MAX_SAFE <= raw <= _MAX_SAFE else _finite_number(raw)
        if first is None:
            append(StateVisit(sid, position, None))
        else:
            order: float | int = event_position.get(first, first)
            append(StateVisit(sid, order, first))
    visits.sort(key=_visit_order)  # stable, like V8's Array.prototype.sort
    return visits


def _visit_order(visit: StateVisit) -> float | int:
    return visit.order


def event_symbols(cands: list[Record]) -> list[str]:
    """Event symbols sorted by ``Number(index)`` (array position when not finite).

    ``tool_call`` events with a non-empty string ``ref`` become ``tool_call:<ref>``; every other
    event with a non-empty string ``kind`` is its kind.
    """
    cand = first_with(cands, "events")
    if cand is None:
        return []
    keyed: list[tuple[float | int, str]] = []
    append = keyed.append
    for position, event in enumerate(cand["events"]):
        if not isinstance(event, dict):
            continue
        kind = event.get("kind")
        if not isinstance(kind, str) or kind == "":
            continue
        index = event.get("index", UNDEFINED)
        if type(index) is not int or not -_MAX_SAFE <= index <= _MAX_SAFE:
            index = _finite_number(index)
            if index is None:
                index = position
        if kind == "tool_call":
            ref = event.get("ref")
            if isinstance(ref, str) and ref != "":
                kind = f"tool_call:{ref}"
        append((index, kind))
    keyed.sort(key=_first)
    return [symbol for _, symbol in keyed]


def _first(item: tuple[float | int, str]) -> float | int:
    return item[0]


T = TypeVar("T")
_UNSET: Final[Any] = object()


class RunView:
    """One run's IR as the trajectory graders see it, each derived structure built once.

    The candidate lists, the cap check, the canonical state visits and the event symbols are
    computed on first use and shared by every grader of the run; ``derive`` holds what one
    grader module derives from them (RQA statistics, lineage sets). One view per run, kept in
    the run's memo (:func:`run_view`) and dropped with it. It holds the trace and IR file but
    never a context, so memo -> view -> data has no way back: refcounting frees it (no cycle).
    """

    __slots__ = ("_derived", "_oversized", "_symbols", "_visits", "_with_trace", "_without_trace", "file_ir", "trace")

    def __init__(self, trace: Trace, file_ir: Any) -> None:
        self.trace = trace
        self.file_ir = file_ir
        self._with_trace: list[Record] | None = None
        self._without_trace: list[Record] | None = None
        self._oversized: Any = _UNSET
        self._visits: list[StateVisit] | None = None
        self._symbols: list[str] | None = None
        self._derived: dict[Any, Any] = {}

    def candidates(self, include_trace: bool) -> list[Record]:
        """The shared candidate list: read it, never change it."""
        if include_trace:
            if self._with_trace is None:
                self._with_trace = _candidates(self.trace, self.file_ir, True)
            return self._with_trace
        if self._without_trace is None:
            self._without_trace = _candidates(self.trace, self.file_ir, False)
        return self._without_trace

    @property
    def oversized(self) -> str | None:
        """:func:`oversized_collection`, checked once for the run."""
        if self._oversized is _UNSET:
            self._oversized = _oversized_collection(self.trace, self.candidates(False))
        found: str | None = self._oversized
        return found

    @property
    def visits(self) -> list[StateVisit]:
        """:func:`state_visits` over the run's candidates (the trace itself excluded)."""
        if self._visits is None:
            self._visits = state_visits(self.candidates(False))
        return self._visits

    @property
    def state_ids(self) -> list[str]:
        """The ids of :attr:`visits`, the sequence the RQA graders quantify."""
        ids: list[str] = self.derive("ir.state_ids", self._state_ids)
        return ids

    def _state_ids(self) -> list[str]:
        return [v.id for v in self.visits]

    @property
    def symbols(self) -> list[str]:
        """:func:`event_symbols` over the run's candidates (the trace itself excluded)."""
        if self._symbols is None:
            self._symbols = event_symbols(self.candidates(False))
        return self._symbols

    def derive(self, key: Any, compute: Callable[[], T]) -> T:
        """``compute()`` once per run under ``key`` (a module-prefixed name)."""
        derived = self._derived
        if key in derived:
            value: T = derived[key]
            return value
        value = derived[key] = compute()
        return value


_VIEW_KEY: Final = "trajectory.view"


def run_view(trace: Trace, ctx: GraderContext | None) -> RunView:
    """The run's :class:`RunView`, made by its first trajectory grader (a fresh one without ``ctx``)."""
    if ctx is None:
        return RunView(trace, None)
    memo = ctx.memo_for(trace)  # emptied when the trace or the IR file is another run's
    view = memo.get(_VIEW_KEY)
    if view is None:
        view = memo[_VIEW_KEY] = RunView(trace, ctx.file_ir)
    assert isinstance(view, RunView)
    return view
