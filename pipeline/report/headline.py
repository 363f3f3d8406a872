"""The headline: which workflows got worse this week, on which graders, and which runs to look at.

"This week" is the 7 days ending at the latest date in the selected data (not the wall clock),
compared with the 7 days before. A (workflow, grader) regressed when both weeks have gated
results and this week's pass rate is lower.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pipeline.report.html import data_attrs, esc, no_data, run_ref, section, table, td
from pipeline.report.queries import RUNS_TO_LOOK_AT, ReportData
from pipeline.report.svg import fmt_rate

MAX_ROWS = 25


def _rate(p: int, n: int) -> float | None:
    return p / n if n else None


def classify(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with rates and delta, regressions first (largest drop first), then graders still failing."""
    out = []
    for r in rows:
        latest, prev = _rate(r["latest_passed"], r["latest_n"]), _rate(r["previous_passed"], r["previous_n"])
        delta = latest - prev if latest is not None and prev is not None else None
        out.append({**r, "latest": latest, "previous": prev, "delta": delta,
                    "regressed": delta is not None and delta < 0})
    regressed = sorted((r for r in out if r["regressed"]),
                       key=lambda r: (r["delta"], -r["latest_n"], r["workflow"], r["grader_id"]))
    failing = sorted((r for r in out if not r["regressed"] and r["latest"] is not None and r["latest"] < 1),
                     key=lambda r: (r["latest"], -r["latest_n"], r["workflow"], r["grader_id"]))
    return regressed + failing


def workflow_rates(rows: list[dict[str, Any]]) -> dict[str, tuple[float | None, float | None]]:
    acc: dict[str, list[int]] = {}
    for r in rows:
        a = acc.setdefault(r["workflow"], [0, 0, 0, 0])
        a[0] += r["latest_passed"]
        a[1] += r["latest_n"]
        a[2] += r["previous_passed"]
        a[3] += r["previous_n"]
    return {w: (_rate(a[0], a[1]), _rate(a[2], a[3])) for w, a in sorted(acc.items())}


def _summary(ranked: list[dict[str, Any]], rates: dict[str, tuple[float | None, float | None]],
             has_previous: bool) -> str:
    worse: dict[str, list[str]] = {}
    for r in ranked:
        if r["regressed"]:
            worse.setdefault(r["workflow"], []).append(r["grader_id"])
    if not has_previous:
        return ("<b>No comparison possible:</b> the selection has no gated results in the previous 7 days. "
                "Below: this week's failing graders, worst first.")
    if not worse:
        return "<b>No regressions:</b> no workflow's grader pass rate dropped compared with the week before."
    parts = []
    for wf, graders in sorted(worse.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        latest, prev = rates[wf]
        parts.append(
            f'<li data-metric="worse-workflow" {data_attrs(workflow=wf, graders=len(graders))}><b>{esc(wf)}</b> '
            f"({fmt_rate(prev)} → {fmt_rate(latest)} overall) on {', '.join(f'<code>{esc(g)}</code>' for g in graders)}</li>")
    n = len(worse)
    return f"<b>{n} workflow{'s' if n != 1 else ''} got worse this week:</b><ul>{''.join(parts)}</ul>"


def _cell(rate: float | None, passed: int, n: int) -> str:
    if not n:
        return '<td class="num muted">–</td>'
    return f'<td class="num">{fmt_rate(rate)} <span class="muted">({passed}/{n})</span></td>'


def _row(r: dict[str, Any]) -> str:
    badge = ('<span class="badge regressed">regressed</span>' if r["regressed"]
             else '<span class="badge failing">failing</span>')
    changed = [what for what, flag in (("config", r["config_changed"]), ("implementation", r["implementation_changed"]))
               if flag]
    hint = ""
    if changed:
        hint = f' <span class="badge hint" title="digests differ between the two weeks">{" + ".join(changed)} changed</span>'
    delta = "–" if r["delta"] is None else f"{100 * r['delta']:+.1f} pp"
    dcls = "num delta-neg" if r["regressed"] else "num"
    look = ", ".join(run_ref(x["run_id"], x["attempt"], x["repository"]) for x in (r["look_at"] or []))
    attrs = data_attrs(metric="weekly", workflow=r["workflow"], grader=r["grader_id"],
                       latest="" if r["latest"] is None else f"{r['latest']:.6f}",
                       previous="" if r["previous"] is None else f"{r['previous']:.6f}",
                       latest_n=r["latest_n"], previous_n=r["previous_n"], regressed=str(r["regressed"]).lower(),
                       config_changed=str(bool(r["config_changed"])).lower(),
                       implementation_changed=str(bool(r["implementation_changed"])).lower())
    return (f"<tr {attrs}><td>{badge}</td>{td(r['workflow'])}<td><code>{esc(r['grader_id'])}</code>{hint}</td>"
            f'{_cell(r["latest"], r["latest_passed"], r["latest_n"])}'
            f'{_cell(r["previous"], r["previous_passed"], r["previous_n"])}'
            f'<td class="{dcls}">{delta}</td><td>{look}</td></tr>')


def render(data: ReportData) -> str:
    title = "Which workflows got worse this week"
    if "grader_results" not in data.tables or data.latest_date is None:
        return section("headline", title, no_data("grader_results", "grader_results" in data.tables))
    d: dt.date = data.latest_date
    intro = (f"This week = {d - dt.timedelta(days=6)} to {d}; the week before = {d - dt.timedelta(days=13)} "
             f"to {d - dt.timedelta(days=7)} (relative to the latest date in the data). Pass rate = passing / "
             "gated results (errors count as not passing; graders without a threshold are informational).")
    ranked = classify(data.weekly)
    has_previous = any(r["previous_n"] for r in data.weekly)
    body = f'<div class="lede">{_summary(ranked, workflow_rates(data.weekly), has_previous)}</div>'
    if ranked:
        shown = ranked[:MAX_ROWS]
        more = len(ranked) - len(shown)
        body += table(["", "workflow", "grader", ("this week", "num"), ("week before", "num"), ("Δ", "num"),
                       f"runs to look at (latest {RUNS_TO_LOOK_AT} failing)"], (_row(r) for r in shown), "weekly wide")
        if more:
            body += f'<p class="muted">{more} more (workflow, grader) pairs below 100% not shown.</p>'
    else:
        body += '<p class="nodata">Every gated grader passed on every run this week.</p>'
    return section("headline", title, body, intro)
