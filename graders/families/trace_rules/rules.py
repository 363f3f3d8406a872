"""The five path rules (spec §3), registered (kind ``trace_rule``) in the reference's order, which
is the order ``verdicts`` applies them in.

Each rule is a pure function of (run, config) returning flags; detail texts are the
reference's, byte for byte, because users grep for them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from graders.families.trace_rules.config import TraceConfig
from graders.formats.model import Flag, Run
from graders.grading.registry import trace_rule

Rule = Callable[[Run, TraceConfig], list[Flag]]

# Hard-coded and case-sensitive like the reference (spec §10.5, kept).
GROUNDING_SOURCES = frozenset({"Read", "Grep", "Glob", "Write"})
GROUNDED_EDITS = frozenset({"Edit", "MultiEdit"})
_PATH_TOOLS = GROUNDING_SOURCES | GROUNDED_EDITS


@trace_rule("forbidden_tool")
def forbidden_tool(run: Run, cfg: TraceConfig) -> list[Flag]:
    return [
        Flag("forbidden_tool", "high", s.step, s.tool, f"forbidden tool '{s.tool}' used at step {s.step}")
        for s in run.steps
        if s.tool in cfg.forbidden_tools
    ]


@trace_rule("out_of_order")
def out_of_order(run: Run, cfg: TraceConfig) -> list[Flag]:
    """Every step whose tool is B with no earlier A (any outcome) for a pair [A, B]."""
    flags: list[Flag] = []
    seen: set[str] = set()
    for s in run.steps:
        for before, after in cfg.must_precede:
            satisfied = isinstance(before, str) and before in seen
            if s.tool == after and not satisfied:
                flags.append(
                    Flag("out_of_order", "medium", s.step, s.tool,
                         f"'{after}' at step {s.step} not preceded by '{before}'")
                )
        seen.add(s.tool)
    return flags


@trace_rule("retry_storm")
def retry_storm(run: Run, cfg: TraceConfig) -> list[Flag]:
    """Maximal stretches of consecutive failures of the stretch's first tool, longer than the threshold."""
    thr = cfg.retry_threshold
    flags: list[Flag] = []
    steps = run.steps
    i = 0
    while i < len(steps):
        first = steps[i]
        if first.ok:
            i += 1
            continue
        j = i
        while j < len(steps) and not steps[j].ok and steps[j].tool == first.tool:
            j += 1
        if j - i > thr:
            flags.append(
                Flag("retry_storm", "medium", first.step, first.tool,
                     f"'{first.tool}' failed {j - i}x in a row (> threshold {thr})")
            )
        i = j
    return flags


@trace_rule("excessive_steps")
def excessive_steps(run: Run, cfg: TraceConfig) -> list[Flag]:
    n = len(run.steps)
    if n > cfg.step_budget:
        return [Flag("excessive_steps", "low", n, None, f"{n} steps > budget {cfg.step_budget}")]
    return []


def _path(args: dict[str, Any]) -> str:
    p = args.get("file_path") or args.get("path") or ""
    return os.path.normpath(str(p)) if p else ""


@trace_rule("edited_without_read")
def edited_without_read(run: Run, cfg: TraceConfig) -> list[Flag]:
    """Grounding proxy: the first Edit/MultiEdit of a path not yet Read/Grep'd/Glob'd/Written."""
    if not cfg.grounding_enabled:
        return []
    seen: set[str] = set()
    flags: list[Flag] = []
    for s in run.steps:
        if s.tool not in _PATH_TOOLS:  # neither reads nor edits: its path is never used
            continue
        path = _path(s.args)
        if not path:
            continue
        if s.tool in GROUNDED_EDITS and path not in seen:
            flags.append(
                Flag("edited_without_read", "medium", s.step, s.tool,
                     f"'{s.tool}' edited '{path}' at step {s.step} without reading it first (ungrounded)")
            )
        seen.add(path)  # a source or an edit: either grounds later edits of the path
    return flags
