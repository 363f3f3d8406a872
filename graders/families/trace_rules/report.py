"""Output (spec §6): the ``--json`` document and the human report, as the reference prints them."""

from __future__ import annotations

import json
from typing import Any

from graders.families.trace_rules.verdicts import GradeReport
from graders.runs.console import printable

RULE = "─" * 60
MARKS = {"clean-pass": "PASS", "pass-with-warnings": "WARN", "corrupt-success": "CORRUPT", "fail": "FAIL"}
ESTIMATES_KEY = "pass_k_estimates"


def to_json(report: GradeReport, max_k: int | None = None) -> str:
    doc: dict[str, Any] = report.to_dict()
    if max_k is not None:
        # An extra top-level key, after the reference's three, so their consumers are unaffected.
        doc[ESTIMATES_KEY] = report.tasks.rows(max_k)
    return json.dumps(doc, ensure_ascii=False, indent=2)


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def render(report: GradeReport, max_k: int | None = None) -> str:
    """The reference's text report; what a run's files said (tasks, run ids, tool names in the
    flags) shown with control characters escaped (graders/runs/console.py), one line each."""
    out = ["TraceGrader report", RULE]
    for r in report.runs:
        out.append(
            f"[{MARKS[r.verdict]:7}] {printable(r.task)} / {printable(str(r.run_id))}  "
            f"(delivered={r.delivered}, steps={r.step_count}, flags={len(r.flags)})"
        )
        out.extend(f"            - {f.severity:6} {f.check}: {printable(f.detail)}" for f in r.flags)
    out += [RULE, "pass^k (repeatability — ALL k runs must deliver):"]
    for task, pk in report.pass_k().items():
        gate = "pass" if pk["pass_hat_k"] else "FAIL"
        out.append(f"    {printable(task)}: pass^{pk['k']} = {gate}  ({pk['n_success']}/{pk['k']} runs delivered)")
    if max_k is not None:
        out.append(f"pass^k / pass@k estimates, k = 1..{max_k} (unbiased; n/a when k > runs):")
        for task, row in report.tasks.rows(max_k).items():
            cells = " | ".join(
                f"k={e['k']} pass^k={_num(e['pass_hat_k'])} pass@k={_num(e['pass_at_k'])}" for e in row["pass_k"]
            )
            out.append(f"    {printable(task)}: n={row['n']} c={row['c']} | {cells}")
    s = report.summary()
    v = s["verdicts"]
    out += [
        RULE,
        f"summary: runs={s['n_runs']} tasks={s['n_tasks']} | "
        f"clean={v['clean-pass']} warn={v['pass-with-warnings']} "
        f"corrupt={v['corrupt-success']} fail={v['fail']} | "
        f"repeatable={s['tasks_repeatable']} flaky={s['tasks_flaky']}",
        f"agent-as-judge axis: {s['judge_axis']}",
    ]
    return "\n".join(out)
