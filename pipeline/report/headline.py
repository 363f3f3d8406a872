"""The headline: which workflows got worse, on which graders, and which runs to look at.

It reads ``regressions`` (docs/statistics.md): a cell is shown as worse only when its test says
so (q ≤ 0.05 in the grader's bad direction), never from a raw difference of rates; cells with
too little data say how many runs they need.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from graders.stats.cells import DEFAULT_FDR, MIN_RUNS
from pipeline.report.html import data_attrs, esc, no_data, run_ref, section, table, td
from pipeline.report.queries import RUNS_TO_LOOK_AT, ReportData
from pipeline.report.svg import fmt_num, mean_chart

VERDICT_BADGE = {"regressed": "regressed", "improved": "ok", "no-change": "hint", "insufficient-data": "warn"}


def _n(v: Any) -> str:
    return "–" if v is None else fmt_num(v)


def _diff(r: dict[str, Any]) -> str:
    if r.get("diff") is None:
        return "–"
    text = f"{r['diff']:+.3g}"
    if r.get("diff_low") is not None:
        text += f' <span class="muted">[{r["diff_low"]:+.3g}, {r["diff_high"]:+.3g}]</span>'
    return text


def _state(r: dict[str, Any]) -> str:
    v = r["verdict"]
    badge = f'<span class="badge {VERDICT_BADGE.get(v, "hint")}">{esc(v)}</span>'
    if v == "insufficient-data":
        badge += (f' <span class="muted">has {r["n_current"]} + {r["n_baseline"]} runs; needs '
                  f'{r.get("runs_needed") or 1} more (≥ {MIN_RUNS} graded runs in each window)</span>')
    return badge


def _regression_row(r: dict[str, Any], data: ReportData) -> str:
    key = (r["workflow"], r["grader_id"])
    runs = data.regression_runs.get(key)
    look = ", ".join(run_ref(x["run_id"], x["attempt"], x["repository"]) for x in runs or [])
    attrs = data_attrs(metric="regression", workflow=r["workflow"], grader=r["grader_id"], verdict=r["verdict"],
                       q=_num_attr(r.get("q_value")), diff=_num_attr(r.get("diff")),
                       change_date=r.get("change_date") or "", n_current=r["n_current"], n_baseline=r["n_baseline"])
    dcls = "num delta-neg" if r["verdict"] == "regressed" else ("num delta-pos" if r["verdict"] == "improved" else "num")
    row = (f"<tr {attrs}><td>{_state(r)}</td>{td(r['workflow'])}<td><code>{esc(r['grader_id'])}</code></td>"
           f'<td class="num">{_n(r.get("mean_current"))} <span class="muted">(n={r["n_current"]})</span></td>'
           f'<td class="num">{_n(r.get("mean_baseline"))} <span class="muted">(n={r["n_baseline"]})</span></td>'
           f'<td class="{dcls}">{_diff(r)}</td><td class="num">{_n(r.get("q_value"))}</td>'
           f'<td>{esc(r.get("change_date") or "–")}</td><td>{look or "–"}</td></tr>')
    series = data.regression_series.get(key)
    if series:
        first = max(dt.date.fromisoformat(r["baseline_start"]), min(p["date"] for p in series))
        chart = mean_chart(r["workflow"], r["grader_id"], series, first, dt.date.fromisoformat(r["date"]),
                           r.get("change_date"), r["current_start"])
        row += f'<tr class="chart-row"><td></td><td colspan="8">{chart}</td></tr>'
    return row


def _num_attr(v: float | None) -> str:
    return "" if v is None else f"{v:.6g}"


def _lede(rows: list[dict[str, Any]], fdr: float) -> str:
    worse: dict[str, list[str]] = {}
    better: dict[str, list[str]] = {}
    for r in rows:
        if r["verdict"] == "regressed":
            worse.setdefault(r["workflow"], []).append(r["grader_id"])
        elif r["verdict"] == "improved":
            better.setdefault(r["workflow"], []).append(r["grader_id"])
    empty = sum(not _graded(r) for r in rows)
    short = sum(r["verdict"] == "insufficient-data" and _graded(r) for r in rows)
    tested = sum(r["verdict"] != "insufficient-data" for r in rows)
    if worse:
        items = "".join(
            f'<li data-metric="worse-workflow" {data_attrs(workflow=wf, graders=len(gs))}><b>{esc(wf)}</b> on '
            f"{', '.join(f'<code>{esc(g)}</code>' for g in gs)}</li>"
            for wf, gs in sorted(worse.items(), key=lambda kv: (-len(kv[1]), kv[0])))
        n = len(worse)
        text = f"<b>{n} workflow{'s' if n != 1 else ''} got worse</b> (q ≤ {fdr:g}):<ul>{items}</ul>"
    else:
        text = (f"<b>No workflow got worse:</b> none of the {tested} tested (workflow, grader) cells changed for "
                f"the worse beyond chance (q ≤ {fdr:g}).")
    if better:
        text += f" {sum(len(g) for g in better.values())} cell(s) improved ({', '.join(esc(w) for w in sorted(better))})."
    if short:
        text += (f" <b>{short} cell(s) have too little data to say</b> (fewer than {MIN_RUNS} graded runs in the "
                 "current or the baseline window); each says how many more runs it needs.")
    if empty:
        text += (f" {empty} cell(s) have no graded value in either window (the grader was unavailable or "
                 "failed on every run) and are not listed.")
    return text


def _graded(r: dict[str, Any]) -> bool:
    """Whether a cell has any graded value: one without is no finding, only noise in the table."""
    return bool(r.get("n_current") or r.get("n_baseline"))


def render(data: ReportData) -> str:
    title = "Which workflows got worse"
    if "grader_results" not in data.tables or data.latest_date is None:
        return section("headline", title, no_data("grader_results", "grader_results" in data.tables))
    rows = data.regressions
    source = ("from the regressions table" if data.regressions_source == "table"
              else "recomputed from the stored grades (the output has no regressions table, or --until asks "
            "for earlier windows)")
    intro = ("Each (workflow, grader): its last 7 days (ending on the workflow's latest date) against the 28 days "
             "before, " + source + ". A cell is worse only when a test over tasks says so: a task-blocked "
             "permutation test (Fisher's exact test for independent pass/fail runs), Benjamini–Hochberg q-values "
             "across every cell, and the grader's direction (lower-is-better graders get worse upwards). "
             "Intervals are 95% and clustered by task; the change date is where the daily series "
             "shifted (docs/statistics.md).")
    body = f'<div class="lede">{_lede(rows, DEFAULT_FDR)}</div>'
    shown = [r for r in rows if (r["workflow"], r["grader_id"]) in data.regression_runs and _graded(r)]
    if shown:
        body += table(["verdict", "workflow", "grader", ("current", "num"), ("baseline", "num"),
                       ("difference [95%]", "num"), ("q", "num"), "change", f"runs (worst {RUNS_TO_LOOK_AT} now)"],
                      (_regression_row(r, data) for r in shown), "weekly wide")
        if len(rows) > len(shown):
            body += f'<p class="muted">{len(rows) - len(shown)} more cells (no change or too little data) not shown.</p>'
    return section("headline", title, body, intro)
