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
from pipeline.stats_read import CHANGED, graded

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
                       change_date=_change(r), n_current=r["n_current"], n_baseline=r["n_baseline"])
    dcls = "num delta-neg" if r["verdict"] == "regressed" else ("num delta-pos" if r["verdict"] == "improved" else "num")
    row = (f"<tr {attrs}><td>{_state(r)}</td>{td(r['workflow'])}<td><code>{esc(r['grader_id'])}</code></td>"
           f'<td class="num">{_n(r.get("mean_current"))} <span class="muted">(n={r["n_current"]})</span></td>'
           f'<td class="num">{_n(r.get("mean_baseline"))} <span class="muted">(n={r["n_baseline"]})</span></td>'
           f'<td class="{dcls}">{_diff(r)}</td><td class="num">{_n(r.get("q_value"))}</td>'
           f'<td>{esc(_change(r) or "–")}</td><td>{look or "–"}</td></tr>')
    series = data.regression_series.get(key)
    if series:
        first = max(dt.date.fromisoformat(r["baseline_start"]), min(p["date"] for p in series))
        chart = mean_chart(r["workflow"], r["grader_id"], series, first, dt.date.fromisoformat(r["date"]),
                           r.get("change_date"), r["current_start"])
        row += f'<tr class="chart-row"><td></td><td colspan="8">{chart}</td></tr>'
    return row


def _change(r: dict[str, Any]) -> str:
    """The change date of a cell called changed; none on the others, whose best split is noise."""
    return (r.get("change_date") or "") if r["verdict"] in CHANGED else ""


def _num_attr(v: float | None) -> str:
    return "" if v is None else f"{v:.6g}"


def _lede(rows: list[dict[str, Any]], fdr: float, history: dict[str, int], days: int) -> str:
    """One of three answers, never a reassurance the tests did not give: some workflows got worse;
    no change detected among the N cells tested; or not enough history to test anything yet."""
    worse: dict[str, list[str]] = {}
    better: dict[str, list[str]] = {}
    for r in rows:
        if r["verdict"] == "regressed":
            worse.setdefault(r["workflow"], []).append(r["grader_id"])
        elif r["verdict"] == "improved":
            better.setdefault(r["workflow"], []).append(r["grader_id"])
    tested = [r for r in rows if r["verdict"] != "insufficient-data"]
    short = [r for r in rows if r["verdict"] == "insufficient-data" and graded(r)]
    untested_wfs = sorted({r["workflow"] for r in short} - {r["workflow"] for r in tested})
    if worse:
        items = "".join(
            f'<li data-metric="worse-workflow" {data_attrs(workflow=wf, graders=len(gs))}><b>{esc(wf)}</b> on '
            f"{', '.join(f'<code>{esc(g)}</code>' for g in gs)}</li>"
            for wf, gs in sorted(worse.items(), key=lambda kv: (-len(kv[1]), kv[0])))
        n = len(worse)
        state, text = "worse", (f"<b>{n} workflow{'s' if n != 1 else ''} got worse</b> (q ≤ {fdr:g}, among "
                                f"{len(tested)} tested cells):<ul>{items}</ul>")
    elif tested:
        state, text = "no-change", (f"<b>No change detected among {len(tested)} tested</b> (workflow, grader) cells: "
                                    f"none changed for the worse beyond chance (q ≤ {fdr:g}).")
    else:
        span = max(history.values(), default=0)
        state, text = "untested", (f"<b>Not enough history to test yet ({span} days of {days})</b>: nothing was "
                                   f"compared, so nothing is known to be fine. A test needs ≥ {MIN_RUNS} graded "
                                   "runs in the current window and in the baseline before it.")
    if better:
        text += f" {sum(len(g) for g in better.values())} cell(s) improved ({', '.join(esc(w) for w in sorted(better))})."
    if tested and untested_wfs:
        text += " <b>Not enough history to test yet</b>: " + ", ".join(
            f"{esc(wf)} ({history.get(wf, 0)} days of {days})" for wf in untested_wfs) + "."
    rest = len(short) - sum(r["workflow"] in untested_wfs for r in short) if tested else 0
    if rest:
        text += (f" {rest} more cell(s) have fewer than {MIN_RUNS} graded runs in a window; each says how many "
                 "more it needs.")
    return f'<div class="lede" data-metric="headline" data-state="{state}">{text}</div>'


def _never(rows: list[dict[str, Any]]) -> str:
    """The cells no run gave a value to, in one line: more runs would not make them testable."""
    never = [r for r in rows if not graded(r)]
    if not never:
        return ""
    graders = sorted({r["grader_id"] for r in never})
    return (f'<p class="muted" data-metric="never-graded" data-value="{len(never)}">{len(never)} cell(s) were '
            f"never graded in either window (the grader was unavailable or failed on every run, so more runs "
            f"will not help) and are not listed: {', '.join(f'<code>{esc(g)}</code>' for g in graders)}.</p>")


STATS_NOTE = (
    "<b>Reading q beside the interval.</b> The 95% interval is the cell's own (clustered by task), "
    "not widened for the other cells. The q-value is the cell's permutation-test p-value corrected across all "
    "{tested} tested cells (Benjamini–Hochberg: roughly p × {tested} / its rank, at most 1), the false-discovery "
    "rate at which it would be called changed. So a no-change cell's interval can exclude 0 at q = 1: among "
    "{tested} tests, some miss 0 by chance alone. Only q decides. The change date (where the daily series "
    "shifted) is shown only on cells called changed: every series has a best split, a changed one a real one.")


HEADERS: list[str | tuple[str, str]] = ["verdict", "workflow", "grader", ("current", "num"), ("baseline", "num"), ("difference [95%]", "num"),
           ("q", "num"), "change", f"runs (worst {RUNS_TO_LOOK_AT} now)"]


def render(data: ReportData) -> str:
    title = "Which workflows got worse"
    if "grader_results" not in data.tables or data.latest_date is None:
        return section("headline", title, no_data("grader_results", "grader_results" in data.tables))
    rows = data.regressions
    window, baseline = data.windows
    source = ("from the regressions table" if data.regressions_source == "table"
              else "recomputed from the stored grades (the output has no regressions table, or --until asks "
            "for earlier windows)")
    intro = (f"Each (workflow, grader): its last {window} days (ending on the workflow's latest date) against the "
             f"{baseline} days before, " + source + ". A cell is worse only when a test over tasks says so: a "
             "task-blocked permutation test (Fisher's exact test for independent pass/fail runs), "
             "Benjamini–Hochberg q-values across every cell, and the grader's direction (lower-is-better graders "
             "get worse upwards). Intervals are 95% and clustered by task (docs/statistics.md).")
    body = _lede(rows, DEFAULT_FDR, data.history, window + baseline)
    shown = [r for r in rows if (r["workflow"], r["grader_id"]) in data.regression_runs and graded(r)]
    changed = [r for r in shown if r["verdict"] in CHANGED]
    others = [r for r in shown if r["verdict"] not in CHANGED]
    if changed:
        body += table(HEADERS, (_regression_row(r, data) for r in changed), "weekly wide")
    if others:
        same = sum(r["verdict"] == "no-change" for r in others)
        short = sorted({r["workflow"] for r in others if r["verdict"] == "insufficient-data"})
        summary = (f"{same} cell(s) with no change detected, {len(others) - same} with too little data to test"
                   + (f" ({', '.join(esc(w) for w in short)})" if short else ""))
        rows_html = table(HEADERS, (_regression_row(r, data) for r in others), "weekly wide")
        # Open when nothing changed: then these rows are the whole answer.
        body += f'<details{"" if changed else " open"}><summary>{summary}</summary>{rows_html}</details>'
    hidden = sum(graded(r) for r in rows) - len(shown)
    if hidden > 0:
        body += f'<p class="muted">{hidden} more cells (no change or too little data) not shown.</p>'
    body += _never(rows)
    tested = sum(r["verdict"] != "insufficient-data" for r in rows)
    if tested:
        body += f'<p class="note" data-metric="stats-note">{STATS_NOTE.format(tested=tested)}</p>'
    return section("headline", title, body, intro)
