"""Building small traces and running one trajectory grader through the registry."""

from __future__ import annotations

from typing import Any

from graders.grading import registry
from graders.grading.registry import GraderContext


def run(grader_id: str, trace: dict[str, Any], config: Any = None, file_ir: Any = None) -> Any:
    spec = registry.get(grader_id)
    assert spec is not None, grader_id
    return spec.fn(trace, GraderContext(config=config if config is not None else {}, file_ir=file_ir))


def ir_trace(**ir: Any) -> dict[str, Any]:
    """A trace whose IR sits under ``trajectoryIR``."""
    return {"toolCalls": [], "trajectoryIR": ir}


def states(seq: str | list[str]) -> dict[str, Any]:
    return ir_trace(states=list(seq))


def events(seq: str | list[str], kind: str = "tool_call") -> dict[str, Any]:
    return ir_trace(events=[{"index": i, "kind": kind, "ref": s} for i, s in enumerate(seq)])
