"""The report's cost section: what the runs cost (docs/observed-graders.md, "Cost").

Spend is AI Credits (AIC) as the runs' logs state them (``runs.ai_credits``, the ``ai-credits``
grader), never priced from tokens; a run without credits is ranked by its tokens. The section
says whether spend rose, fell or stayed from the ``regressions`` rows of ``ai-credits`` (the same
test as every grader, lower is better), draws each workflow's daily mean spend per run with its
95% band (``grader_stats``), and lists the costliest runs, the model mix and ``cost_outliers``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import duckdb

from pipeline.report.html import data_attrs, esc, no_data, run_ref, section, table, td
from pipeline.report.svg import fmt_num, mean_chart

CREDITS = "ai-credits"
TOP_RUNS = 15
MODELS = 12
OUTLIERS = 25
COST_COLUMNS = ("ai_credits", "tokens_input", "tokens_output", "tokens_cache_read", "tokens_cache_write",
                "tokens_reasoning", "model_calls", "models")
# Every token of a run, each once (the token classes are disjoint).
TOKENS = ("(coalesce(tokens_input, 0) + coalesce(tokens_output, 0) + coalesce(tokens_cache_read, 0) + "
          "coalesce(tokens_cache_write, 0) + coalesce(tokens_reasoning, 0))")
HAS_TOKENS = ("(tokens_input IS NOT NULL OR tokens_output IS NOT NULL OR tokens_cache_read IS NOT NULL OR "
              "tokens_cache_write IS NOT NULL OR tokens_reasoning IS NOT NULL)")

Row = dict[str, Any]


@dataclass
class Spend:
    """The cost section's numbers (``present``: the runs table holds the cost columns)."""

    present: bool = False
    totals: list[Row] = field(default_factory=list)  # per workflow: runs, with credits, Σ AIC, Σ tokens, days
    series: dict[str, list[Row]] = field(default_factory=dict)  # workflow → daily ai-credits grader_stats
    top_credits: list[Row] = field(default_factory=list)
    top_tokens: list[Row] = field(default_factory=list)  # runs without credits, by tokens
    models: list[Row] = field(default_factory=list)
    outliers: list[Row] = field(default_factory=list)
    outliers_total: int = 0
    outlier_settings: tuple[float, int] | None = None


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[Row]:
    cur = con.execute(sql)
    names = [d[0] for d in cur.description or []]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def collect(con: duckdb.DuckDBPyConnection, tables: frozenset[str]) -> Spend:
    """The section's numbers over the report's ``v_*`` views (scope.py)."""
    out = Spend()
    if "runs" not in tables:
        return out
    columns = {r[0] for r in con.execute("SELECT * FROM v_runs LIMIT 0").description or []}
    if not set(COST_COLUMNS) <= columns:  # an output graded before the cost graders existed
        return out
    out.present = True
    out.totals = _rows(con, f"""
        SELECT workflow, count(*) AS runs, count(ai_credits) AS with_credits, sum(ai_credits) AS credits,
               sum({TOKENS}) FILTER (WHERE {HAS_TOKENS}) AS tokens, count(DISTINCT date) AS days
        FROM v_runs GROUP BY workflow ORDER BY credits DESC NULLS LAST, tokens DESC NULLS LAST, workflow""")
    if "grader_stats" in tables:
        for r in _rows(con, f"""
                SELECT workflow, date, n, mean, ci_low, ci_high FROM v_grader_stats
                WHERE grader_id = '{CREDITS}' AND window_days = 1 ORDER BY workflow, date"""):
            out.series.setdefault(r.pop("workflow"), []).append(r)
    listed = f"""workflow, date, run_id, attempt, repository, ai_credits, {TOKENS} AS tokens, model_calls,
                 [m.model FOR m IN coalesce(models, [])] AS model_names"""
    out.top_credits = _rows(con, f"""
        SELECT {listed} FROM v_runs WHERE ai_credits IS NOT NULL
        ORDER BY ai_credits DESC, date DESC, workflow, run_id, attempt LIMIT {TOP_RUNS}""")
    out.top_tokens = _rows(con, f"""
        SELECT {listed} FROM v_runs WHERE ai_credits IS NULL AND {HAS_TOKENS}
        ORDER BY tokens DESC, date DESC, workflow, run_id, attempt LIMIT {TOP_RUNS}""")
    out.models = _rows(con, f"""
        SELECT m.model AS model, sum(m.calls) AS calls, count(*) AS runs, count(DISTINCT workflow) AS workflows,
               list_sort(list(DISTINCT workflow))[1:3] AS some_workflows
        FROM (SELECT workflow, unnest(models) AS m FROM v_runs WHERE models IS NOT NULL)
        GROUP BY m.model ORDER BY calls DESC, model LIMIT {MODELS}""")
    if "cost_outliers" in tables:
        out.outliers_total = con.execute("SELECT count(*) FROM v_cost_outliers").fetchall()[0][0]
        out.outliers = _rows(con, f"""
            SELECT workflow, date, run_id, attempt, repository, metric, value, baseline_median, ratio, baseline_runs
            FROM v_cost_outliers ORDER BY date DESC, ratio DESC, workflow, run_id, attempt LIMIT {OUTLIERS}""")
        settings = con.execute("SELECT DISTINCT factor, window_days FROM v_cost_outliers ORDER BY ALL").fetchall()
        if len(settings) == 1:
            out.outlier_settings = (float(settings[0][0]), int(settings[0][1]))
    return out


def spend_line(regressions: list[Row]) -> str:
    """"Spend rose / fell / unchanged" from the ``ai-credits`` regression cells (q and direction
    decide, as for every grader: ``regressed`` is a rise in spend)."""
    cells = [r for r in regressions if r["grader_id"] == CREDITS]
    rose = [r for r in cells if r["verdict"] == "regressed"]
    fell = [r for r in cells if r["verdict"] == "improved"]
    tested = [r for r in cells if r["verdict"] != "insufficient-data"]

    def named(rs: list[Row]) -> str:
        return ", ".join(f"<b>{esc(r['workflow'])}</b> ({_change(r)})" for r in rs)

    if rose:
        state, text = "rose", f"<b>Spend rose</b> on {named(rose)}"
        if fell:
            text += f"; it fell on {named(fell)}"
    elif fell:
        state, text = "fell", f"<b>Spend fell</b> on {named(fell)}"
    elif tested:
        state, text = "unchanged", f"<b>Spend unchanged</b>: no change detected among {len(tested)} workflows tested"
    elif cells:
        state, text = "untested", "<b>Spend not tested yet</b>: too few runs with AI Credits in the windows"
    else:
        state, text = "none", "<b>Spend unknown</b>: no run states AI Credits (tokens are listed in the cost section)"
    return f'<p class="lede" data-metric="spend-line" data-state="{state}">{text}.</p>'


def _change(r: Row) -> str:
    base, cur = r.get("mean_baseline"), r.get("mean_current")
    ratio = f"×{cur / base:.2f}" if base and cur is not None else f"{r.get('diff') or 0:+.3g} AIC"
    since = f", since {esc(r['change_date'])}" if r.get("change_date") else ""
    return f"{fmt_num(base)} → {fmt_num(cur)} AIC per run, {ratio}{since}"


def _run_row(r: Row) -> str:
    models = ", ".join(r.get("model_names") or []) or "–"
    attrs = data_attrs(metric="costly-run", workflow=r["workflow"], run=r["run_id"],
                       credits="" if r["ai_credits"] is None else f"{r['ai_credits']:.6g}", tokens=r["tokens"])
    return (f"<tr {attrs}>{td(r['workflow'])}{td(r['date'])}<td>{run_ref(r['run_id'], r['attempt'], r['repository'])}"
            f'</td><td class="num">{fmt_num(r["ai_credits"])}</td><td class="num">{fmt_num(r["tokens"])}</td>'
            f'<td class="num">{fmt_num(r["model_calls"])}</td>{td(models)}</tr>')


def render(spend: Spend, regressions: list[Row], fleet_dates: tuple[dt.date | None, dt.date | None]) -> str:
    title = "What the runs cost"
    if not spend.present:
        return section("cost", title, no_data("runs", bool(spend.totals)) if spend.totals else
                       '<p class="nodata" data-nodata="cost">No data: the runs table holds no cost columns '
                       "(graded before the cost graders; the next <code>fleetgrade run</code> regrades it).</p>")
    intro = ("AI Credits (AIC, 1 AIC = 0.01 USD) as each run's logs state them, never priced from tokens; "
             "router/classifier calls apart; tokens counted once each (fresh input, output, cache read and write, "
             "reasoning). Spend per run is tested like every grader (<code>ai-credits</code>, lower is better).")
    body = spend_line(regressions)
    body += table(["workflow", ("runs", "num"), ("with AIC", "num"), ("AIC", "num"), ("AIC per run", "num"),
                   ("tokens", "num"), ("days", "num")],
                  (f'<tr {data_attrs(metric="workflow-spend", workflow=t["workflow"])}>{td(t["workflow"])}'
                   f'<td class="num">{t["runs"]:,}</td><td class="num">{t["with_credits"]:,}</td>'
                   f'<td class="num">{fmt_num(t["credits"])}</td>'
                   f'<td class="num">{fmt_num(t["credits"] / t["with_credits"] if t["with_credits"] else None)}</td>'
                   f'<td class="num">{fmt_num(t["tokens"])}</td><td class="num">{t["days"]}</td></tr>'
                   for t in spend.totals))
    first, last = fleet_dates
    if spend.series and first and last:
        cards = "".join(
            f'<div class="card"><h3>{esc(wf)}</h3><div class="meta">AIC per run, daily mean and 95% band</div>'
            f"{mean_chart(wf, CREDITS, points, first, last)}</div>" for wf, points in sorted(spend.series.items()))
        body += f'<h3>Spend per run, per day</h3><div class="grid">{cards}</div>'
    if spend.top_credits:
        body += "<h3>Costliest runs (AI Credits)</h3>" + table(
            ["workflow", "date", "run", ("AIC", "num"), ("tokens", "num"), ("model calls", "num"), "models"],
            (_run_row(r) for r in spend.top_credits))
    if spend.top_tokens:
        body += "<h3>Runs without AI Credits, by tokens</h3>" + table(
            ["workflow", "date", "run", ("AIC", "num"), ("tokens", "num"), ("model calls", "num"), "models"],
            (_run_row(r) for r in spend.top_tokens))
    if spend.models:
        body += "<h3>Model mix</h3>" + table(
            ["model", ("agent calls", "num"), ("runs", "num"), ("workflows", "num"), "e.g."],
            (f'<tr {data_attrs(metric="model-mix", model=m["model"], calls=m["calls"])}>{td(m["model"])}'
             f'<td class="num">{m["calls"]:,}</td><td class="num">{m["runs"]:,}</td>'
             f'<td class="num">{m["workflows"]}</td>{td(", ".join(m["some_workflows"]))}</tr>' for m in spend.models))
    body += _outliers(spend)
    return section("cost", title, body, intro)


def _g(v: float) -> str:
    return f"{v:.6g}"


def _outliers(spend: Spend) -> str:
    rule = ("k× the median of the workflow's runs over the N days before" if spend.outlier_settings is None else
            f"{spend.outlier_settings[0]:g}× the median of the workflow's runs over the "
            f"{spend.outlier_settings[1]} days before")
    head = f"<h3>Cost outliers</h3><p class=\"muted\">Runs above {rule} (<code>cost_outliers</code>)."
    if not spend.outliers:
        return head + " None in the selection.</p>"
    more = f" Latest {len(spend.outliers)} of {spend.outliers_total:,}." if spend.outliers_total > len(spend.outliers) else ""
    return head + more + "</p>" + table(
        ["workflow", "date", "run", "metric", ("value", "num"), ("median", "num"), ("ratio", "num"), ("baseline runs", "num")],
        (f'<tr {data_attrs(metric="cost-outlier", workflow=o["workflow"], run=o["run_id"], ratio=_g(o["ratio"]))}>'
         f"{td(o['workflow'])}{td(o['date'])}<td>{run_ref(o['run_id'], o['attempt'], o['repository'])}</td>"
         f'{td(o["metric"])}<td class="num">{fmt_num(o["value"])}</td><td class="num">{fmt_num(o["baseline_median"])}</td>'
         f'<td class="num delta-neg">×{o["ratio"]:.2f}</td><td class="num">{o["baseline_runs"]}</td></tr>'
         for o in spend.outliers))
