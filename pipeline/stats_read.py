"""Reading the statistics back without Beam (``fleetgrade check``, the report).

``regressions`` rows come from the stored table when it was computed with the asked windows;
otherwise they are recomputed here from the stored ``grader_results`` and ``trace_verdicts``
with the same pure core (graders/stats) the pipeline uses, so both give the same numbers.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow.dataset as ds

from graders.parquet import HIVE_NULL
from graders.stats.cells import CellAcc, partition_observations, regression_row, shift, with_q_values
from pipeline.tables import dataset

RESULT_COLUMNS = ["run_id", "attempt", "grader_id", "value", "passed", "status", "direction", "unit"]
VERDICT_COLUMNS = ["run_id", "attempt", "task", "delivered"]
ORDER = {"regressed": 0, "improved": 1, "no-change": 2, "insufficient-data": 3}


def has_table(output: str, table: str) -> bool:
    return any(Path(output, table).glob("*/*/*.parquet"))


def partitions(output: str, table: str) -> list[tuple[str, str]]:
    """(workflow, date) of each stored partition of ``table``, from the folder names."""
    out = set()
    for path in Path(output, table).glob("workflow=*/date=*/*.parquet"):
        wf, date = path.parent.parent.name.split("=", 1)[1], path.parent.name.split("=", 1)[1]
        if HIVE_NULL not in (wf, date):
            out.add((unquote(wf), unquote(date)))
    return sorted(out)


def read_rows(output: str, table: str, columns: list[str] | None = None,
              where: ds.Expression | None = None) -> list[dict[str, Any]]:
    if not has_table(output, table):
        return []
    cols = None if columns is None else ["workflow", "date", *columns]
    rows: list[dict[str, Any]] = dataset(output, table).to_table(columns=cols, filter=where).to_pylist()
    return rows


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
        if until is None or date <= until:
            latest[wf] = max(latest.get(wf, date), date)
    tests = []
    for wf, end in sorted(latest.items()):
        start = shift(end, 1 - window - baseline)
        where = (ds.field("workflow") == wf) & (ds.field("date") >= start) & (ds.field("date") <= end)
        by_date: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = defaultdict(lambda: ([], []))
        for r in read_rows(output, "grader_results", RESULT_COLUMNS, where):
            by_date[r["date"]][0].append(r)
        for r in read_rows(output, "trace_verdicts", VERDICT_COLUMNS, where):
            by_date[r["date"]][1].append(r)
        daily: dict[str, dict[str, CellAcc]] = defaultdict(dict)
        for date, (results, verdicts) in sorted(by_date.items()):
            for grader, obs in partition_observations(wf, results, verdicts):
                daily[grader].setdefault(date, CellAcc()).add(obs)
        for grader in sorted(daily):
            tests.append(regression_row(wf, grader, daily[grader], end, window, baseline))
    return with_q_values(tests)


def worst_first(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Regressed first (smallest q, then largest |effect|), then improved, no change, insufficient."""
    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        q = r.get("q_value")
        effect = r.get("effect_size")
        return (ORDER.get(r["verdict"], 9), 2.0 if q is None else q, -abs(effect) if effect is not None else 0.0,
                r["workflow"], r["grader_id"])
    return sorted(rows, key=key)
