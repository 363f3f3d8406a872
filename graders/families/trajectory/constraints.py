"""skill-constraint-coverage (docs/reference/graders.md §8): configured regex constraints over tool calls and
actions.

Patterns are JavaScript regular expressions compiled as ``new RegExp(pattern, "i")``. They are
translated to Python ``re`` by ``jsregex.compile_js_regex`` (which also decides validity the
way JavaScript does) and matched against the UTF-16 code-unit view of each text, because a
non-unicode JavaScript regex sees code units, not code points. Matching goes through
``jsmatch`` (RE2 where possible, else a time budget per evaluation), so a pattern such as
``(a+)+$`` cannot hang the job; a pattern past the budget ends the grader with an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from graders.families.trajectory.ir import (
    Raw,
    Record,
    Trace,
    candidates,
    first_with_record,
    non_empty_str,
    records,
    unavailable,
)
from graders.grading.registry import GraderContext
from graders.jsrt.jscompat import UNDEFINED, is_record, js_stringify
from graders.jsrt.jsmatch import Budget, JsMatcher, compile_js_matcher
from graders.jsrt.jsregex import JsRegexError, utf16_slice, utf16_units

MAX_CONSTRAINT_TEXT_LENGTH: Final = 4096
_MAX_LISTED: Final = 5


@dataclass(frozen=True)
class Entry:
    text: str  # UTF-16 code-unit view (astral characters as surrogate pairs)
    ok: bool


def _entries(trace: Trace, ctx: GraderContext) -> list[Entry]:
    cands = candidates(trace, ctx, include_trace=True)
    calls_src = first_with_record(cands, "toolCalls")
    actions_src = first_with_record(cands, "actions")
    calls = records(calls_src["toolCalls"]) if calls_src else []
    actions = records(actions_src["actions"]) if actions_src else []
    entries: list[Entry] = []
    for call in calls:
        name = call["name"] if isinstance(call.get("name"), str) else ""
        args = call.get("arguments", UNDEFINED)
        args_text = "" if args is UNDEFINED else js_stringify(args) or ""
        # An unfinished call never produced a result, so it cannot satisfy a constraint.
        ok = call.get("success") is not False and call.get("completed") is not False
        entries.append(Entry(utf16_units(utf16_slice(f"{name} {args_text}", MAX_CONSTRAINT_TEXT_LENGTH)), ok))
    for action in actions:
        atype = action["type"] if isinstance(action.get("type"), str) else ""
        target = action["target"] if isinstance(action.get("target"), str) else ""
        text = utf16_slice(f"{atype} {target}", MAX_CONSTRAINT_TEXT_LENGTH)
        entries.append(Entry(utf16_units(text), action.get("validAtIssueTime") is not False))
    return entries


def skill_constraint_coverage(trace: Trace, config: Record, ctx: GraderContext) -> Raw:
    """Covered constraints / configured constraints (invalid patterns count, never covered)."""
    constraints: list[Any] = config["constraints"] if isinstance(config.get("constraints"), list) else []
    if not constraints:
        return unavailable("not applicable: no constraints configured")
    entries = _entries(trace, ctx)
    if not entries:
        return unavailable("not applicable: trace lacks toolCalls/actions")
    valid = invalid = exercised = covered = 0
    failing: list[str] = []
    budget = Budget()
    for constraint in constraints:
        rec = constraint if is_record(constraint) else None
        source = rec["pattern"] if rec is not None and isinstance(rec.get("pattern"), str) else ""
        regex: JsMatcher | None = None
        if source:
            try:
                regex = compile_js_matcher(source, "i")
            except JsRegexError:
                regex = None
        if regex is None:
            invalid += 1
            continue
        valid += 1
        matches = [e for e in entries if budget.search(regex, e.text)]
        if not matches:
            continue
        exercised += 1
        require_success = rec is None or rec.get("requireSuccess") is not False
        if not require_success or all(e.ok for e in matches):
            covered += 1
        elif len(failing) < _MAX_LISTED:
            failing.append(rec["id"] if rec is not None and non_empty_str(rec.get("id")) else source)
    if valid == 0:
        return unavailable("not applicable: no constraints with a valid pattern configured")
    details = f"constraints={len(constraints)} exercised={exercised} covered={covered}"
    if invalid:
        details += f" invalidPattern={invalid}"
    if failing:
        details += f"; unmet: {', '.join(failing)}"
    return {"value": covered / len(constraints), "details": details}
