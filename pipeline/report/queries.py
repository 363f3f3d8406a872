"""Every number of the report, aggregated in DuckDB over the ``v_<table>`` views of ``scope.py``.

Pass rate = passing results / gated results, where a gated result is one with a pass/fail
outcome or an error on a grader that has a threshold (an error counts as not passing).
Informational results (no threshold) and unavailable ones are not gated. Lists are capped and
every ORDER BY is total, so the same data always gives the same report.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import duckdb

from graders.stats.cells import DEFAULT_BASELINE, DEFAULT_WINDOW
from pipeline.report import spend
from pipeline.report.scope import Selection, open_scope
from pipeline.stats_read import CHANGED, graded, recompute_regressions, stored_windows, worst_first

GATED = "(passed IS NOT NULL OR (status = 'error' AND threshold IS NOT NULL))"
WORST_RUNS = 25
RUNS_TO_LOOK_AT = 5
CONTINUOUS_BINS = 20
MAX_INTEGER_BINS = 30  # integer-valued graders (counts) get one bar per value up to this many
TASKS = 50
TRACE_LIST = 25
MAX_K = 5

Row = dict[str, Any]


@dataclass
class ReportData:
    tables: frozenset[str]
    selection: Selection
    overview: Row = field(default_factory=dict)
    latest_date: dt.date | None = None
    # The headline: regressions rows (stored, or recomputed from the grades), worst first, and
    # per shown row its runs in the current window and its daily grader_stats series.
    regressions: list[Row] = field(default_factory=list)
    regressions_source: str = ""
    windows: tuple[int, int] = (DEFAULT_WINDOW, DEFAULT_BASELINE)  # the regression windows, in days
    history: dict[str, int] = field(default_factory=dict)  # workflow → days of grades the windows hold
    regression_runs: dict[tuple[str, str], list[Row]] = field(default_factory=dict)
    regression_series: dict[tuple[str, str], list[Row]] = field(default_factory=dict)
    pass_rate: list[Row] = field(default_factory=list)
    histograms: list[Row] = field(default_factory=list)
    worst_runs: list[Row] = field(default_factory=list)
    reliability: list[Row] = field(default_factory=list)
    reliability_total: int = 0
    verdicts: list[Row] = field(default_factory=list)
    flags: list[Row] = field(default_factory=list)
    corrupt_runs: list[Row] = field(default_factory=list)
    trace_counts: tuple[int, int] = (0, 0)  # traced runs, corrupt successes + failures
    dead_letters: list[Row] = field(default_factory=list)
    versions: list[Row] = field(default_factory=list)
    configs: list[Row] = field(default_factory=list)
    implementations: list[Row] = field(default_factory=list)
    drift: list[Row] = field(default_factory=list)  # grader_drift rows per grader (graders/tables/drift.py)
    spend: spend.Spend = field(default_factory=spend.Spend)  # the cost section's numbers (spend.py)


def rows(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> list[Row]:
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description or []]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def collect(output: str, sel: Selection) -> ReportData:
    con, tables = open_scope(output, sel)
    data = ReportData(tables=tables, selection=sel)
    data.overview = overview(con, tables)
    if "grader_results" in tables:
        runs_join = "runs" in tables
        data.latest_date = con.execute("SELECT max(date) FROM v_grader_results").fetchall()[0][0]
        if data.latest_date is not None:
            regressions(con, output, sel, tables, data, runs_join)
        data.pass_rate = rows(con, f"""
            SELECT workflow, date, count_if(passed) AS passed, count_if({GATED}) AS gated
            FROM v_grader_results WHERE date IS NOT NULL GROUP BY ALL HAVING gated > 0 ORDER BY workflow, date""")
        data.histograms = histograms(con)
        data.worst_runs = worst_runs(con, runs_join)
        data.implementations = rows(con, """
            SELECT grader_id, implementation_id, implementation_version, implementation_digest, count(*) AS results
            FROM v_grader_results GROUP BY ALL ORDER BY ALL""")
    if "task_reliability" in tables:
        data.reliability, data.reliability_total = reliability(con)
    if "trace_verdicts" in tables:
        trace(con, data)
    if "grader_drift" in tables:
        data.drift = rows(con, """
            SELECT grader_id, count(*) AS n, count(DISTINCT (workflow, run_id, attempt)) AS runs
            FROM v_grader_drift GROUP BY ALL ORDER BY n DESC, grader_id""")
    if "dead_letter" in tables:
        data.dead_letters = rows(con, """
            SELECT error_class, stage, count(*) AS n, count(DISTINCT workflow) AS workflows,
                   min(input) AS example_input, arg_min(message, input) AS example_message
            FROM v_dead_letter GROUP BY ALL ORDER BY n DESC, error_class, stage""")
    data.spend = spend.collect(con, tables)
    provenance(con, tables, data)
    return data


SHOWN_REGRESSIONS = 40  # headline rows: every regressed and improved cell, then the rest up to this


def _iso(v: Any) -> Any:
    return v.isoformat() if isinstance(v, dt.date) else v


def regressions(con: duckdb.DuckDBPyConnection, output: str, sel: Selection, tables: frozenset[str],
                data: ReportData, runs_join: bool) -> None:
    """The ``regressions`` rows of the selected workflows, with the runs and daily statistics of
    the shown ones. Recomputed from the grades with the same core when the output predates the
    table, or when --until asks for windows ending earlier than the stored ones."""
    if "regressions" in tables and sel.until is None:
        found = [{k: _iso(v) for k, v in r.items()} for r in rows(con, "SELECT * FROM v_regressions")]
        data.regressions_source = "table"
    else:
        until = sel.until.isoformat() if sel.until else None
        window, baseline = stored_windows(output) or (DEFAULT_WINDOW, DEFAULT_BASELINE)  # as `run` computed them
        found = [r for r in recompute_regressions(output, window, baseline, until)
                 if not sel.workflows or r["workflow"] in sel.workflows]
        data.regressions_source = "recomputed"
    data.regressions = worst_first(found)
    if found:
        data.windows = (int(found[0]["window_days"]), int(found[0]["baseline_days"]))
    data.history = history(con, found)
    # Cells never graded are summed up in one line, not shown: every changed cell, then the rest.
    shown = [r for r in data.regressions if r["verdict"] in CHANGED]
    shown += [r for r in data.regressions if r["verdict"] not in CHANGED and graded(r)]
    for r in shown[:max(SHOWN_REGRESSIONS, sum(x["verdict"] in CHANGED for x in shown))]:
        key = (r["workflow"], r["grader_id"])
        worst = "DESC" if r.get("direction") == "lower_is_better" else "ASC"
        data.regression_runs[key] = rows(con, f"""
            SELECT run_id, attempt, date, repository, value, status FROM ({_with_repository(runs_join)})
            WHERE workflow = ? AND grader_id = ? AND date BETWEEN ?::DATE AND ?::DATE
            ORDER BY value {worst} NULLS LAST, date DESC, run_id, attempt LIMIT {RUNS_TO_LOOK_AT}""",
            [r["workflow"], r["grader_id"], r["current_start"], r["date"]])
        if r["verdict"] in CHANGED and "grader_stats" in tables:
            data.regression_series[key] = rows(con, """
                SELECT date, n, mean, ci_low, ci_high FROM v_grader_stats
                WHERE workflow = ? AND grader_id = ? AND window_days = 1 AND date BETWEEN ?::DATE AND ?::DATE
                ORDER BY date""", [r["workflow"], r["grader_id"], r["baseline_start"], r["date"]])


def history(con: duckdb.DuckDBPyConnection, found: list[Row]) -> dict[str, int]:
    """Per workflow, the days from its first graded date inside its regression windows to the
    last: how much of the windows its history fills."""
    firsts = {wf: first for wf, first in con.execute(
        "SELECT workflow, min(date) FROM v_grader_results WHERE date IS NOT NULL GROUP BY ALL").fetchall()}
    spans: dict[str, int] = {}
    for r in found:
        if r["workflow"] in firsts:
            end = dt.date.fromisoformat(str(r["date"]))
            start = max(firsts[r["workflow"]], dt.date.fromisoformat(str(r["baseline_start"])))
            spans[r["workflow"]] = max(0, (end - start).days + 1)
    return spans


def overview(con: duckdb.DuckDBPyConnection, tables: frozenset[str]) -> Row:
    ov: Row = {"graded": None, "dead": None, "first": None, "last": None, "workflows": []}
    if "runs" in tables:
        ov["graded"] = con.execute("SELECT count(*) FROM v_runs").fetchall()[0][0]
    elif "grader_results" in tables:
        ov["graded"] = con.execute(
            "SELECT count(*) FROM (SELECT DISTINCT workflow, date, run_id, attempt FROM v_grader_results)"
        ).fetchall()[0][0]
    if "dead_letter" in tables:
        # Regrade dead letters are not inputs of the grading run: inputs = graded + dead letters.
        ov["dead"] = con.execute(
            "SELECT count(*) FROM v_dead_letter WHERE stage IS DISTINCT FROM 'regrade'").fetchall()[0][0]
    dated = [t for t in ("runs", "grader_results", "dead_letter") if t in tables]
    if dated:
        union = " UNION ALL ".join(f"SELECT workflow, date FROM v_{t}" for t in dated)
        first, last = con.execute(f"SELECT min(date), max(date) FROM ({union})").fetchall()[0]
        ov["first"], ov["last"] = first, last
        ov["workflows"] = [r[0] for r in con.execute(
            f"SELECT DISTINCT workflow FROM ({union}) WHERE workflow IS NOT NULL ORDER BY 1").fetchall()]
    return ov


def _with_repository(runs_join: bool) -> str:
    """Results with the run's repository (for links) when the runs table is there."""
    if runs_join:
        return ("SELECT g.*, r.repository FROM v_grader_results g "
                "LEFT JOIN v_runs r USING (workflow, date, run_id, attempt)")
    return "SELECT *, NULL::VARCHAR AS repository FROM v_grader_results"


def histograms(con: duckdb.DuckDBPyConnection) -> list[Row]:
    """Per grader: fixed bins (computed in SQL) over its finite values, with its threshold."""
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE hist_spec AS
        WITH thr AS (  -- the most common threshold, ties to the smallest: deterministic under parallelism
            SELECT grader_id, threshold AS common FROM (
                SELECT grader_id, threshold, count(*) AS c FROM v_grader_results
                WHERE threshold IS NOT NULL GROUP BY ALL)
            QUALIFY row_number() OVER (PARTITION BY grader_id ORDER BY c DESC, threshold) = 1),
        meta AS (
            SELECT grader_id, min(grader_index) AS idx, min(name) AS name, min(unit) AS unit,
                   min(direction) AS direction, min(source) AS source, any_value(thr.common) AS threshold,
                   count(DISTINCT g.threshold) AS thresholds, count_if(passed) AS passed, count_if({GATED}) AS gated,
                   count(*) AS results
            FROM v_grader_results g LEFT JOIN thr USING (grader_id) GROUP BY grader_id),
        st AS (
            SELECT grader_id, min(value) AS lo, max(value) AS hi, count(*) AS n, bool_and(value = round(value)) AS integral
            FROM v_grader_results WHERE isfinite(value) GROUP BY grader_id),
        rng AS (
            SELECT meta.*, st.n, st.integral,
                   least(st.lo, coalesce(threshold, st.lo)) AS a, greatest(st.hi, coalesce(threshold, st.hi)) AS b
            FROM meta LEFT JOIN st USING (grader_id))
        SELECT *,
            CASE WHEN integral AND ceil(b) - floor(a) < {MAX_INTEGER_BINS} THEN floor(a) - 0.5
                 WHEN a = b THEN a - 0.5 ELSE a END AS start,
            CASE WHEN integral AND ceil(b) - floor(a) < {MAX_INTEGER_BINS} THEN 1.0
                 WHEN a = b THEN 1.0 ELSE (b - a) / {CONTINUOUS_BINS} END AS width,
            CASE WHEN integral AND ceil(b) - floor(a) < {MAX_INTEGER_BINS} THEN (ceil(b) - floor(a) + 1)::INTEGER
                 WHEN a = b THEN 1 ELSE {CONTINUOUS_BINS} END AS bins
        FROM rng""")
    specs = rows(con, "SELECT * FROM hist_spec ORDER BY idx, grader_id")
    counts: dict[str, dict[int, int]] = {}
    for gid, b, n in con.execute("""
            SELECT g.grader_id, least(s.bins - 1, floor((g.value - s.start) / s.width))::INTEGER AS bin, count(*)
            FROM v_grader_results g JOIN hist_spec s USING (grader_id)
            WHERE isfinite(g.value) GROUP BY ALL""").fetchall():
        counts.setdefault(gid, {})[b] = n
    for s in specs:
        got = counts.get(s["grader_id"], {})
        # A grader with no finite value (all errors or unavailable) keeps its card, without bars.
        s["counts"] = [got.get(i, 0) for i in range(s["bins"] if s["n"] else 0)]
    return specs


def worst_runs(con: duckdb.DuckDBPyConnection, runs_join: bool) -> list[Row]:
    return rows(con, f"""
        SELECT workflow, date, run_id, attempt, any_value(repository) AS repository,
               count_if(status = 'fail') AS failed, count_if(status = 'error') AS errors, count(*) AS graders,
               list_sort(list(grader_id) FILTER (WHERE status IN ('fail', 'error'))) AS failing
        FROM ({_with_repository(runs_join)})
        GROUP BY workflow, date, run_id, attempt HAVING failed + errors > 0
        ORDER BY failed + errors DESC, errors DESC, date DESC NULLS LAST, workflow, run_id, attempt
        LIMIT {WORST_RUNS}""")


def reliability(con: duckdb.DuckDBPyConnection) -> tuple[list[Row], int]:
    """Each task's latest row in the selection, least reliable first."""
    latest = """SELECT * FROM v_task_reliability
                QUALIFY row_number() OVER (PARTITION BY workflow, task ORDER BY date DESC) = 1"""
    total = con.execute(f"SELECT count(*) FROM ({latest})").fetchall()[0][0]
    got = rows(con, f"""
        SELECT workflow, task, date, n, c, pass_hat_k_strict,
               list_filter(pass_k, lambda p: p.k <= {MAX_K}) AS pass_k
        FROM ({latest})
        ORDER BY CASE WHEN n > 0 THEN c / n END ASC NULLS FIRST, pass_hat_k_strict, workflow, task
        LIMIT {TASKS}""")
    return got, int(total)


def trace(con: duckdb.DuckDBPyConnection, data: ReportData) -> None:
    data.verdicts = rows(con, """
        SELECT workflow, verdict, count(*) AS n FROM v_trace_verdicts GROUP BY ALL ORDER BY workflow, verdict""")
    data.flags = rows(con, """
        SELECT f."check" AS "check", f.severity AS severity, count(*) AS n
        FROM (SELECT unnest(flags) AS f FROM v_trace_verdicts) GROUP BY ALL ORDER BY n DESC, 1, 2 LIMIT 20""")
    repo = ("(SELECT any_value(r.repository) FROM v_runs r WHERE r.workflow = t.workflow AND r.date = t.date "
            "AND r.run_id = t.run_id AND r.attempt = t.attempt)") if "runs" in data.tables else "NULL::VARCHAR"
    data.corrupt_runs = rows(con, f"""
        SELECT workflow, date, run_id, attempt, task, verdict, len(flags) AS flags, {repo} AS repository,
               list_sort(list_distinct([f."check" FOR f IN flags])) AS checks
        FROM (SELECT * FROM v_trace_verdicts WHERE verdict IN ('corrupt-success', 'fail')
              ORDER BY verdict = 'fail', date DESC NULLS LAST, workflow, run_id, attempt LIMIT {TRACE_LIST}) t
        ORDER BY verdict = 'fail', date DESC NULLS LAST, workflow, run_id, attempt""")
    data.trace_counts = con.execute(
        "SELECT count(*), count_if(verdict IN ('corrupt-success', 'fail')) FROM v_trace_verdicts").fetchall()[0]


def provenance(con: duckdb.DuckDBPyConnection, tables: frozenset[str], data: ReportData) -> None:
    versioned = [t for t in sorted(tables) if t in {"grader_results", "runs", "dead_letter", "trace_verdicts",
                                                     "task_reliability", "observations"}]
    if versioned:
        union = " UNION ALL ".join(
            f"SELECT '{t}' AS tbl, fleetgrade_version AS version, count(*) AS n FROM v_{t} GROUP BY ALL"
            for t in versioned)
        data.versions = rows(con, f"SELECT * FROM ({union}) ORDER BY tbl, version NULLS LAST")
    source = "v_runs" if "runs" in tables else ("v_grader_results" if "grader_results" in tables else None)
    if source:
        data.configs = rows(con, f"""
            SELECT config_digest, count(*) AS n, min(date) AS first, max(date) AS last,
                   count(DISTINCT workflow) AS workflows
            FROM {source} GROUP BY ALL ORDER BY last DESC, config_digest""")
