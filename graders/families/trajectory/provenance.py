"""Evidence use and lineage: tool-output consumption, end-to-end lineage, action provenance,
grounding accuracy (docs/reference/graders.md §7).

The reference answers "does this node reach an evidence root through provenance edges"
with one depth-first search per output, which is quadratic on long chains. Reachability is
the same whichever direction it is computed in, so here one forward pass from the roots
(over edges from -> to) marks every node that has a root behind it, in O(nodes + edges).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from graders.families.trajectory.ir import (
    Raw,
    Record,
    Trace,
    candidates,
    first_with,
    non_empty_str,
    records,
    run_view,
    unavailable,
)
from graders.grading.registry import GraderContext
from graders.jsrt.jscompat import is_record

_MAX_LISTED = 5


def tool_output_consumption_rate(trace: Trace, config: Record, ctx: GraderContext) -> Raw:
    """Tool-originated observations consumed by at least one action id."""
    cands = candidates(trace, ctx, include_trace=True)

    def has_records(c: Record, key: str) -> bool:
        return isinstance(c.get(key), list) and any(is_record(v) for v in c[key])

    cand = (
        next((c for c in cands if has_records(c, "observations") and has_records(c, "toolCalls")), None)
        # An observations-only candidate reports "no tool-originated observations", not "none".
        or next((c for c in cands if has_records(c, "observations")), None)
        or first_with(cands, "observations")
        or {}
    )
    observations = records(cand.get("observations"))
    if not observations:
        return unavailable("not applicable: no observations in the trace")
    call_ids = {c["id"] for c in records(cand.get("toolCalls")) if non_empty_str(c.get("id"))}
    tool_obs = [o for o in observations if non_empty_str(o.get("sourceToolCallId")) and o["sourceToolCallId"] in call_ids]
    if not tool_obs:
        return unavailable("not applicable: no tool-originated observations in the trace")

    def consumed(o: Record) -> bool:
        ids = o.get("consumedByActionIds")
        return isinstance(ids, list) and any(non_empty_str(i) for i in ids)

    used = sum(1 for o in tool_obs if consumed(o))
    unconsumed = [
        o["id"] if non_empty_str(o.get("id")) else o["sourceToolCallId"] for o in tool_obs if not consumed(o)
    ][:_MAX_LISTED]
    details = f"toolObservations={len(tool_obs)} consumed={used}"
    if unconsumed:
        details += f"; unconsumed: {', '.join(unconsumed)}"
    return {"value": used / len(tool_obs), "details": details}


def _grounded(trace: Trace, ctx: GraderContext, ir: Record) -> set[str]:
    """:func:`_grounded_nodes` of ``ir``, once per run and candidate (lineage and action
    provenance usually pick the same one). The view keeps ``ir`` alive, so its id is stable."""
    view = run_view(trace, ctx)
    grounded: set[str] = view.derive(("provenance.grounded", id(ir)), lambda: _grounded_nodes(ir))
    return grounded


def _grounded_nodes(ir: Record) -> set[str]:
    """Every node with a path back (to -> from) to a tool-call or observation id, roots included."""
    roots = {
        item["id"]
        for item in [*ir["toolCalls"], *ir["observations"]]
        if is_record(item) and non_empty_str(item.get("id"))
    }
    children: dict[str, list[str]] = {}
    for edge in ir["provenanceEdges"]:
        if is_record(edge) and non_empty_str(edge.get("from")) and non_empty_str(edge.get("to")):
            children.setdefault(edge["from"], []).append(edge["to"])
    grounded = set(roots)
    pending = deque(roots)
    while pending:
        for child in children.get(pending.popleft(), ()):
            if child not in grounded:
                grounded.add(child)
                pending.append(child)
    return grounded


def end_to_end_lineage_completeness(trace: Trace, config: Record, ctx: GraderContext) -> Raw:
    """Safe outputs whose ref traces back to evidence (duplicates counted separately)."""
    ir = first_with(candidates(trace, ctx, include_trace=True), "events", "provenanceEdges", "toolCalls", "observations")
    if ir is None:
        return unavailable("not applicable: trace lacks events, provenanceEdges, toolCalls, or observations")
    outputs: list[Any] = [e.get("ref") for e in ir["events"] if is_record(e) and e.get("kind") == "safe_output"]
    if not outputs:
        return unavailable("not applicable: no final safe outputs")
    if not all(non_empty_str(ref) for ref in outputs):
        return unavailable("unavailable: safe output is missing a provenance reference")
    grounded = _grounded(trace, ctx, ir)
    complete = sum(1 for ref in outputs if ref in grounded)
    missing = [ref for ref in outputs if ref not in grounded][:_MAX_LISTED]
    details = f"outputs={len(outputs)} traceable={complete}"
    if missing:
        details += f"; missing lineage: {', '.join(missing)}"
    return {"value": complete / len(outputs), "details": details}


def action_provenance_coverage(trace: Trace, config: Record, ctx: GraderContext) -> Raw:
    """Consequential actions with a provenance path to evidence."""
    ir = first_with(candidates(trace, ctx, include_trace=True), "actions", "provenanceEdges", "toolCalls", "observations")
    if ir is None:
        return unavailable("not applicable: trace lacks actions, provenanceEdges, toolCalls, or observations")
    actions = ir["actions"]
    if not all(is_record(a) for a in actions):
        return unavailable("unavailable: action entry is not a record")
    if not all(isinstance(a.get("consequential"), bool) for a in actions):
        return unavailable("unavailable: action is missing the canonical consequential flag")
    consequential = [a for a in actions if a["consequential"] is True]
    if not consequential:
        return unavailable("not applicable: no consequential actions")
    if not all(non_empty_str(a.get("id")) for a in consequential):
        return unavailable("unavailable: consequential action is missing an id")
    grounded = _grounded(trace, ctx, ir)
    covered = sum(1 for a in consequential if a["id"] in grounded)
    missing = [a["id"] for a in consequential if a["id"] not in grounded][:_MAX_LISTED]
    details = f"consequentialActions={len(consequential)} covered={covered}"
    if missing:
        details += f"; missing provenance: {', '.join(missing)}"
    return {"value": covered / len(consequential), "details": details}


def grounding_accuracy(trace: Trace, config: Record, ctx: GraderContext) -> Raw:
    """Actions valid at issue time / issued actions."""
    ir = first_with(candidates(trace, ctx, include_trace=True), "actions")
    if ir is None or not ir["actions"]:
        return unavailable("not applicable: no issued actions")
    actions = ir["actions"]
    if not all(is_record(a) and isinstance(a.get("validAtIssueTime"), bool) for a in actions):
        return unavailable("unavailable: every action requires a boolean validAtIssueTime")
    labels = [
        a["id"] if non_empty_str(a.get("id")) else f"action-{i + 1}"
        for i, a in enumerate(actions)
        if a["validAtIssueTime"] is False
    ]
    valid = len(actions) - len(labels)
    details = f"actions={len(actions)} valid={valid}"
    if labels:
        details += f"; ungrounded: {', '.join(labels[:_MAX_LISTED])}"
    return {"value": valid / len(actions), "details": details}
