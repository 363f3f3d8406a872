"""Per-run verdicts (spec §4) and the whole report: runs, strict pass^k per task, summary (§5, §6)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from graders.families.trace_rules.config import TraceConfig
from graders.families.trace_rules.passk import PassKAccumulator, strict_gate
from graders.families.trace_rules.rules import Rule
from graders.formats.model import VERDICTS, Flag, Run, RunReport, Verdict
from graders.grading.registry import REGISTRY


def registered_rules() -> list[Rule]:
    """The registered trace rules, in registration order (the reference's five come first)."""
    rules: list[Rule] = REGISTRY.plugins("trace_rule")
    return rules


def check_run(run: Run, cfg: TraceConfig) -> list[Flag]:
    flags: list[Flag] = []
    for rule in registered_rules():
        flags.extend(rule(run, cfg))
    return flags


def verdict(delivered: bool, flags: Sequence[Flag]) -> Verdict:
    if not delivered:
        return "fail"  # flags are still listed
    if not flags:
        return "clean-pass"
    if any(f.severity == "high" for f in flags):
        return "corrupt-success"
    return "pass-with-warnings"


def grade_run(run: Run, cfg: TraceConfig) -> RunReport:
    flags = tuple(check_run(run, cfg))
    v = verdict(run.ok, flags)
    return RunReport(
        task=run.task,
        run_id=run.run_id,
        delivered=run.ok,
        step_count=len(run.steps),
        flags=flags,
        corrupt_success=v == "corrupt-success",
        verdict=v,
    )


@dataclass(frozen=True)
class GradeReport:
    runs: tuple[RunReport, ...]
    tasks: PassKAccumulator
    judge_axis: str

    def pass_k(self) -> dict[str, dict[str, Any]]:
        return {
            t: {"k": c.n, "n_success": c.c, "n_fail": c.n - c.c, "pass_hat_k": strict_gate(c.n, c.c)}
            for t, c in self.tasks.tasks.items()
        }

    def summary(self) -> dict[str, Any]:
        counts = dict.fromkeys(VERDICTS, 0)
        for r in self.runs:
            counts[r.verdict] += 1
        repeatable = sum(1 for c in self.tasks.tasks.values() if strict_gate(c.n, c.c))
        return {
            "n_runs": len(self.runs),
            "n_tasks": len(self.tasks.tasks),
            "verdicts": counts,
            "tasks_repeatable": repeatable,
            # "flaky" includes deterministic failures (spec §10.2, kept: it is the CI gate).
            "tasks_flaky": len(self.tasks.tasks) - repeatable,
            "judge_axis": self.judge_axis,
        }

    def to_dict(self) -> dict[str, Any]:
        return {"runs": [r.to_dict() for r in self.runs], "pass_k": self.pass_k(), "summary": self.summary()}

    def exit_code(self) -> int:
        """3 when any run is corrupt-success or any task not all-delivered, else 0."""
        s = self.summary()
        return 3 if s["verdicts"]["corrupt-success"] or s["tasks_flaky"] else 0


def grade(runs: Sequence[Run], cfg: TraceConfig) -> GradeReport:
    return GradeReport(
        runs=tuple(grade_run(r, cfg) for r in runs),
        tasks=PassKAccumulator().add_all((r.task, r.ok) for r in runs),
        judge_axis=cfg.judge_axis,
    )
