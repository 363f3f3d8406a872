"""The canonical trace schema (spec §1) and the per-run report (spec §4)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Severity = Literal["high", "medium", "low"]
Verdict = Literal["clean-pass", "pass-with-warnings", "corrupt-success", "fail"]

# Order of the verdict counters in the summary; all four keys are always present.
VERDICTS: tuple[Verdict, ...] = ("clean-pass", "pass-with-warnings", "corrupt-success", "fail")


@dataclass(slots=True)  # one per tool call of every run: slots make it cheaper to build
class Step:
    step: int
    tool: str
    args: dict[str, Any] = field(default_factory=dict)
    observation: str = ""
    ok: bool = True
    agent: str | None = None  # the subagent that made the call (graders/formats); None: the main agent


@dataclass
class Run:
    task: str
    run_id: str
    ok: bool  # the run delivered (task-level success), not "every step ok"
    steps: list[Step] = field(default_factory=list)


@dataclass(frozen=True)
class Flag:
    check: str
    severity: Severity
    step: int
    tool: str | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "severity": self.severity,
            "step": self.step,
            "tool": self.tool,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class RunReport:
    task: str
    run_id: str
    delivered: bool
    step_count: int
    flags: tuple[Flag, ...]
    corrupt_success: bool
    verdict: Verdict

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "run_id": self.run_id,
            "delivered": self.delivered,
            "step_count": self.step_count,
            "flags": [f.to_dict() for f in self.flags],
            "corrupt_success": self.corrupt_success,
            "verdict": self.verdict,
        }
