"""trace-grader's canonical ``traces.json`` (spec §1, §2): the parser of ``fleetgrade trace --traces``.

The other formats have their own readers, one module each, behind the input-format seam
(graders/formats/: hooks.py, claude_code.py, copilot.py, otlp.py, aw_session.py, ghaw/).
"""

from __future__ import annotations

from typing import Any

from graders.formats.jsonl import json_type
from graders.formats.model import Run, Step

__all__ = ["TraceFormatError", "runs_from_traces"]


_SCAVENGED_STEP_KEYS = ("file_path", "command", "path", "url", "query")


class TraceFormatError(ValueError):
    """traces.json content the canonical schema cannot represent; the message says where."""


def _text(value: Any) -> str:
    # The reference uses str() on ids and names, so 5 becomes "5"; null is handled by callers.
    return value if isinstance(value, str) else str(value)


def _step_number(value: Any, where: str) -> int:
    if isinstance(value, (bool, int, float, str)):
        try:
            return int(value)  # reference semantics: "3" -> 3, 2.9 -> 2
        except (ValueError, OverflowError):
            pass
    raise TraceFormatError(f"{where}: 'step' must be an integer, got {value!r}")


def _step_from_obj(idx: int, s: Any, where: str) -> Step:
    if not isinstance(s, dict):
        raise TraceFormatError(f"{where}: a step must be an object, got a JSON {json_type(s)}")
    args = s.get("args")
    if args is None:
        args = {k: v for k, v in s.items() if k in _SCAVENGED_STEP_KEYS}
    return Step(
        step=_step_number(s.get("step", idx), where),
        tool=_text(s.get("tool") or s.get("tool_name") or ""),
        args=args if isinstance(args, dict) else {},
        observation=_text(s.get("observation", "") or ""),
        ok=bool(s.get("ok", True)),  # bool(): the string "false" is true (spec §10.8, kept)
    )


def _run_from_obj(r: Any, default_task: str, where: str) -> Run:
    if not isinstance(r, dict):
        raise TraceFormatError(f"{where}: a run must be an object, got a JSON {json_type(r)}")
    raw_steps = r.get("steps")
    if raw_steps is None:
        raw_steps = []
    if not isinstance(raw_steps, list):
        raise TraceFormatError(f"{where}: 'steps' must be a list, got a JSON {json_type(raw_steps)}")
    steps = [_step_from_obj(i, s, f"{where} step {i}") for i, s in enumerate(raw_steps, 1)]
    ok = r.get("ok")
    if ok is None:  # derived: at least one step and every step ok
        ok = bool(steps) and all(s.ok for s in steps)
    task_value = r.get("task", default_task)
    task = default_task if task_value is None else _text(task_value)
    return Run(task=task, run_id=_text(r.get("run_id") or r.get("id") or task), ok=bool(ok), steps=steps)


def runs_from_traces(obj: Any) -> list[Run]:
    """The three top-level shapes: ``{"tasks": [...]}``, ``{"runs": [...]}``, a bare list."""
    runs: list[Run] = []
    if isinstance(obj, dict) and "tasks" in obj:
        groups = obj["tasks"] or []
        if not isinstance(groups, list):
            raise TraceFormatError(f"'tasks' must be a list, got a JSON {json_type(groups)}")
        for ti, t in enumerate(groups, 1):
            if not isinstance(t, dict):
                raise TraceFormatError(f"task {ti}: must be an object, got a JSON {json_type(t)}")
            tid = _text(t.get("task") or t.get("id") or "task")
            group_runs = t.get("runs") or []
            if not isinstance(group_runs, list):
                raise TraceFormatError(f"task {ti}: 'runs' must be a list, got a JSON {json_type(group_runs)}")
            runs.extend(_run_from_obj(r, tid, f"task {ti} run {ri}") for ri, r in enumerate(group_runs, 1))
        return runs
    if obj is not None and not isinstance(obj, (dict, list)):
        raise TraceFormatError(f"top level must be an object or a list, got a JSON {json_type(obj)}")
    raw = obj.get("runs") if isinstance(obj, dict) else obj
    raw = raw or []
    if not isinstance(raw, list):
        raise TraceFormatError(f"'runs' must be a list, got a JSON {json_type(raw)}")
    return [_run_from_obj(r, "task", f"run {ri}") for ri, r in enumerate(raw, 1)]
