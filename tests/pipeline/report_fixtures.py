"""A synthetic fleetgrade output for report tests: 20 days, a planted regression, hostile strings.

Written straight as hive-partitioned Parquet with the real Arrow schemas (trace tables with the
shapes the trace engineers publish), so the report is tested on every table without a pipeline.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from graders.tables.paths import partition_path
from schemas.tables import DEAD_LETTER, GRADER_RESULTS, RUNS

FLAG = pa.struct([("check", pa.string()), ("severity", pa.string()), ("step", pa.int64()),
                  ("tool", pa.string()), ("detail", pa.string())])
TRACE_VERDICTS = pa.schema([("run_id", pa.string()), ("attempt", pa.int32()), ("task", pa.string()),
                            ("verdict", pa.string()), ("delivered", pa.bool_()), ("step_count", pa.int64()),
                            ("corrupt_success", pa.bool_()), ("flags", pa.list_(FLAG)),
                            ("fleetgrade_version", pa.string())])
PASS_K = pa.struct([("k", pa.int32()), ("pass_hat_k", pa.float64()), ("pass_at_k", pa.float64())])
TASK_RELIABILITY = pa.schema([("task", pa.string()), ("n", pa.int64()), ("c", pa.int64()),
                              ("pass_hat_k_strict", pa.bool_()), ("pass_k", pa.list_(PASS_K)),
                              ("fleetgrade_version", pa.string())])
SCHEMAS = {"grader_results": GRADER_RESULTS, "runs": RUNS, "dead_letter": DEAD_LETTER,
           "trace_verdicts": TRACE_VERDICTS, "task_reliability": TASK_RELIABILITY}

FIRST = dt.date(2026, 10, 1)
DAYS = 20
WORKFLOWS = ("alpha", "beta", "gamma")
HOSTILE_RUN = '<script>alert("run")</script>'
HOSTILE_MESSAGE = '<img src="http://evil.example/x.png" onerror="alert(1)"> & broken'
HOSTILE_REPO = 'evil/x" onmouseover="alert(1)'
GRADERS = (  # id, name, unit, direction, threshold
    ("g-rate", "Rate <b>grader</b>", "ratio", "higher_is_better", 0.8),
    ("g-count", "Count grader", "count", "lower_is_better", 3.0),
    ("g-info", "Informational", "ms", "lower_is_better", None),
    ("g-never", "Never available", "count", "lower_is_better", None),
)


def _value(grader: str, wf: str, day: int, i: int) -> float | None:
    """Deterministic values; alpha's g-rate drops in the last 7 days (the planted regression)."""
    if grader == "g-rate":
        base = 0.95 if not (wf == "alpha" and day >= DAYS - 7) else 0.6
        return round(base - 0.1 * ((day * 7 + i * 3) % 4) / 3, 4)
    if grader == "g-count":
        if wf == "gamma" and i == 2 and day % 5 == 0:
            return None  # an error on a gated grader
        return float((day + i * 2 + (2 if wf == "beta" and day < DAYS - 7 else 0)) % 6)
    if grader == "g-never":
        return None
    return 1000.0 + 37.5 * ((day * 13 + i * 7) % 50)


def build_rows(runs_per_day: int = 3, workflows: tuple[str, ...] = WORKFLOWS, days: int = DAYS,
               hostile: bool = True) -> dict[str, list[dict[str, Any]]]:
    tables: dict[str, list[dict[str, Any]]] = defaultdict(list)
    counter = 5000
    for wf in workflows:
        for day in range(days):
            date = (FIRST + dt.timedelta(days=day)).isoformat()
            for i in range(runs_per_day):
                counter += 1
                run_id = HOSTILE_RUN if hostile and wf == "gamma" and day == days - 1 and i == 0 else str(counter)
                repo = HOSTILE_REPO if hostile and wf == "beta" and i == 1 else "octo/repo"
                counts = {"pass": 0, "fail": 0, "error": 0}
                for idx, (gid, name, unit, direction, thr0) in enumerate(GRADERS):
                    # The second configuration relaxes g-count: two thresholds, 90 results each per workflow.
                    thr = 4.0 if gid == "g-count" and day >= 10 else thr0
                    v = _value(gid, wf, day, i)
                    passed = None if thr is None or v is None else (v >= thr if direction == "higher_is_better" else v <= thr)
                    status = ("unavailable" if gid == "g-never" else "error") if v is None else (
                        "fail" if passed is False else "pass")
                    counts[status] = counts.get(status, 0) + 1
                    tables["grader_results"].append({
                        "workflow": wf, "date": date, "run_id": run_id, "attempt": 1, "grader_id": gid,
                        "grader_index": idx, "name": name, "source": "builtin", "family": "builtin", "value": v,
                        "unit": unit, "direction": direction, "threshold": thr, "passed": passed, "status": status,
                        "message": HOSTILE_MESSAGE if hostile and status == "error" else None,
                        "implementation_id": "gh-aw/graders", "implementation_version": 1,
                        "implementation_digest": f"impl-{gid}", "config_digest": "cfg-a" if day < 10 else "cfg-b",
                        "fleetgrade_version": "0.1.0"})
                tables["runs"].append({
                    "workflow": wf, "date": date, "run_id": run_id, "attempt": 1, "repository": repo,
                    "graders": len(GRADERS), "passed": counts["pass"], "failed": counts["fail"],
                    "errors": counts["error"], "unavailable": counts.get("unavailable", 0), "warnings": [],
                    "config_digest": "cfg-a" if day < 10 else "cfg-b", "fleetgrade_version": "0.1.0"})
                verdict = ("clean-pass", "pass-with-warnings", "corrupt-success", "fail", "clean-pass")[(day + i) % 5]
                flags = [] if verdict == "clean-pass" else [
                    {"check": "forbidden_tool" if verdict == "corrupt-success" else "retry_storm",
                     "severity": "high" if verdict == "corrupt-success" else "medium", "step": 2, "tool": "bash",
                     "detail": "x"}]
                tables["trace_verdicts"].append({
                    "workflow": wf, "date": date, "run_id": run_id, "attempt": 1, "task": f"task-{i}",
                    "verdict": verdict, "delivered": verdict != "fail", "step_count": 4,
                    "corrupt_success": verdict == "corrupt-success", "flags": flags, "fleetgrade_version": "0.1.0"})
            for t in range(2):
                n, c = 3, 3 - (day + t) % 3
                tables["task_reliability"].append({
                    "workflow": wf, "date": date, "task": f"task-{t}<i>" if hostile and t else f"task-{t}",
                    "n": n, "c": c, "pass_hat_k_strict": c == n, "fleetgrade_version": "0.1.0",
                    "pass_k": [{"k": 1, "pass_hat_k": c / n, "pass_at_k": c / n},
                               {"k": 2, "pass_hat_k": (c * (c - 1)) / (n * (n - 1)), "pass_at_k": None},
                               {"k": 3, "pass_hat_k": 1.0 if c == n else 0.0, "pass_at_k": None}]})
    for j, (wf, date, cls) in enumerate([("alpha", None, "MetadataError"), ("beta", None, "MetadataError"),
                                         ("gamma", FIRST.isoformat(), "GradeError")]):
        tables["dead_letter"].append({
            "workflow": wf, "date": date, "input": f"fleet/{wf}/run-{900 + j}", "run_id": str(900 + j),
            "stage": "grade" if cls == "GradeError" else "prepare", "error_class": cls,
            "message": HOSTILE_MESSAGE if hostile and j == 0 else f"fleet/{wf}/run-{900 + j}: bad", "fleetgrade_version": "0.1.0"})
    return tables


def write_output(out: Path, tables: dict[str, list[dict[str, Any]]], only: tuple[str, ...] | None = None) -> Path:
    """Hive-partitioned files, one per (table, workflow, date), partition columns in the path only."""
    for table, rows in tables.items():
        if only is not None and table not in only:
            continue
        parts: dict[tuple[str, str | None], list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            parts[(r["workflow"], r["date"])].append({k: v for k, v in r.items() if k not in ("workflow", "date")})
        for (wf, date), part_rows in parts.items():
            folder = out / partition_path(table, wf, date)
            folder.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_pylist(part_rows, schema=SCHEMAS[table]), folder / "part-00000.parquet")
    return out
