"""Reading the statistics back without Beam (``fleetgrade check``, the report).

``regressions`` rows come from the stored table when it was computed with the asked windows;
otherwise they are recomputed here from the stored ``grader_results`` and ``trace_verdicts``
with the same pure core (graders/stats) the pipeline uses, so both give the same numbers.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from graders.stats.bounds import ordinal
from graders.stats.cells import CellAcc, partition_observations, regression_row, shift, with_q_values
from graders.tables.paths import parse_partition
from pipeline.tables import create_table_view, has_partitions
from schemas.tables import SPECS
from transforms.output_lock import GcsStore

RESULT_COLUMNS = ["run_id", "attempt", "grader_id", "value", "passed", "status", "direction", "unit"]
VERDICT_COLUMNS = ["run_id", "attempt", "task", "delivered"]
ORDER = {"regressed": 0, "improved": 1, "no-change": 2, "insufficient-data": 3}
CHANGED = ("regressed", "improved")  # the verdicts whose change date is shown


def has_table(output: str, table: str) -> bool:
    return has_partitions(output, table)


def copy_table(output: str, table: str, into: str) -> int:
    """Copies a ``gs://`` output's ``table`` (its partition files) under ``into``, in the same
    layout; returns the number of files."""
    store = GcsStore(output)
    count = 0
    for blob in store.bucket.list_blobs(prefix=f"{store.prefix}{table}/"):
        rel = blob.name[len(store.prefix):]
        if rel.endswith(".parquet") and rel.count("/") == 3 and parse_partition(rel) is not None:
            target = Path(into, *rel.split("/"))
            target.parent.mkdir(parents=True, exist_ok=True)
            blob.download_to_filename(str(target))
            count += 1
    return count


def _query(output: str, table: str, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    """Rows of ``sql`` over the view ``table`` (pipeline.tables: hive columns typed, hashed
    workflow names shown whole); ``date`` is read as ``YYYY-MM-DD`` text, as the core keys it."""
    if not has_table(output, table):
        return []
    con = duckdb.connect()
    create_table_view(con, output, table)
    cur = con.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def partitions(output: str, table: str) -> list[tuple[str, str]]:
    """(workflow, date) of each dated partition of ``table`` that holds rows."""
    rows = _query(output, table, f"SELECT DISTINCT workflow, CAST(date AS VARCHAR) AS date FROM {table} "
                  "WHERE workflow IS NOT NULL AND date IS NOT NULL", [])
    return sorted((r["workflow"], r["date"]) for r in rows)


def _as_text(table: str) -> list[str]:
    """``date`` and the table's other DATE columns: read as ``YYYY-MM-DD`` text, as the core keys them."""
    return ["date", *(f.name for f in SPECS[table].schema if pa.types.is_date32(f.type))]


def read_rows(output: str, table: str, columns: list[str] | None = None,
              window: tuple[str, str, str] | None = None) -> list[dict[str, Any]]:
    """``columns`` (all when None) with ``workflow`` and ``date``, dates as text; ``window`` =
    (workflow, first date, last date) keeps that workflow's rows in those dates."""
    texts = _as_text(table)
    picked = ("* REPLACE (" + ", ".join(f"CAST({c} AS VARCHAR) AS {c}" for c in texts) + ")" if columns is None
              else ", ".join(["workflow", *(f"CAST({c} AS VARCHAR) AS {c}" if c in texts else c
                                            for c in ["date", *columns])]))
    sql, params = f"SELECT {picked} FROM {table}", []
    if window is not None:
        sql += " WHERE workflow = ? AND date BETWEEN CAST(? AS DATE) AND CAST(? AS DATE)"
        params = list(window)
    return _query(output, table, sql, params)


def stored_windows(output: str) -> tuple[int, int] | None:
    """The (window, baseline) days of the stored ``regressions``, or None when there are no rows
    (or, from an older run, rows of several windows)."""
    pairs = {(r["window_days"], r["baseline_days"]) for r in
             _query(output, "regressions", "SELECT DISTINCT window_days, baseline_days FROM regressions", [])}
    return pairs.pop() if len(pairs) == 1 else None


def stored_regressions(output: str, window: int, baseline: int) -> list[dict[str, Any]] | None:
    """The stored rows for these windows, or None when the table holds other windows (or none)."""
    rows = read_rows(output, "regressions")
    if not rows or any(r["window_days"] != window or r["baseline_days"] != baseline for r in rows):
        return None
    return rows


def recompute_regressions(output: str, window: int, baseline: int, until: str | None = None) -> list[dict[str, Any]]:
    """One regressions row per (workflow, grader) for the window ending on the workflow's latest
    date (at most ``until``), with BH q-values across all of them (as ``fleetgrade run`` computes them)."""
    latest: dict[str, str] = {}
    for wf, date in partitions(output, "grader_results"):
        # A date outside the statistics' range (graders/stats/bounds.py) is never a window's end.
        if ordinal(date) is not None and (until is None or date <= until):
            latest[wf] = max(latest.get(wf, date), date)
    tests = []
    for wf, end in sorted(latest.items()):
        start = shift(end, 1 - window - baseline)
        by_date: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = defaultdict(lambda: ([], []))
        for r in read_rows(output, "grader_results", RESULT_COLUMNS, (wf, start, end)):
            by_date[r["date"]][0].append(r)
        for r in read_rows(output, "trace_verdicts", VERDICT_COLUMNS, (wf, start, end)):
            by_date[r["date"]][1].append(r)
        daily: dict[str, dict[str, CellAcc]] = defaultdict(dict)
        for date, (results, verdicts) in sorted(by_date.items()):
            for grader, obs in partition_observations(wf, results, verdicts):
                daily[grader].setdefault(date, CellAcc()).add(obs)
        for grader in sorted(daily):
            tests.append(regression_row(wf, grader, daily[grader], end, window, baseline))
    return with_q_values(tests)


def graded(r: dict[str, Any]) -> bool:
    """Whether a regressions cell has any graded value: one without (a grader unavailable or
    erroring on every run) cannot be tested however many runs come."""
    return bool(r.get("n_current") or r.get("n_baseline"))


def history_span(output: str, workflows: list[str] | None = None) -> int | None:
    """Days from the first to the last date of ``grader_results`` (of ``workflows``), or None on
    gs:// (only the regressions table is read there)."""
    if output.startswith("gs://"):
        return None
    dates = [dt.date.fromisoformat(d) for wf, d in partitions(output, "grader_results")
             if not workflows or wf in workflows]
    return (max(dates) - min(dates)).days + 1 if dates else None


def worst_first(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Regressed first (smallest q, then largest |effect|), then improved, no change, insufficient."""
    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        q = r.get("q_value")
        effect = r.get("effect_size")
        return (ORDER.get(r["verdict"], 9), 2.0 if q is None else q, -abs(effect) if effect is not None else 0.0,
                r["workflow"], r["grader_id"])
    return sorted(rows, key=key)
