"""Arrow schemas of the output tables (README.md, "Tables"). Column order is the file order.

Partition columns (``workflow``, ``date``) are not stored in the files: they live in the hive
path ``<table>/workflow=<w>/date=<YYYY-MM-DD>/``; readers add them back.
"""

from __future__ import annotations

import pyarrow as pa

PARTITION_COLUMNS = ("workflow", "date")
# How readers are told the partitioning: `date` is a DATE in every reader (pyarrow, DuckDB, Polars,
# BigQuery), whatever a partition holds; an undated partition (`__HIVE_DEFAULT_PARTITION__`) reads as null.
PARTITION_SCHEMA = pa.schema([("workflow", pa.string()), ("date", pa.date32())])

METRIC = pa.struct([("id", pa.string()), ("value", pa.float64())])

GRADER_RESULTS = pa.schema(
    [
        ("run_id", pa.string()),
        ("attempt", pa.int32()),
        ("grader_id", pa.string()),
        ("grader_index", pa.int32()),
        ("name", pa.string()),
        ("description", pa.string()),
        ("source", pa.string()),
        ("family", pa.string()),
        ("value", pa.float64()),
        ("unit", pa.string()),
        ("direction", pa.string()),
        ("threshold", pa.float64()),
        ("passed", pa.bool_()),
        ("status", pa.string()),
        ("severity", pa.string()),
        ("message", pa.string()),
        ("error", pa.string()),
        ("details", pa.string()),
        ("metrics", pa.list_(METRIC)),
        ("diagnostics", pa.string()),
        ("implementation_id", pa.string()),
        ("implementation_version", pa.int32()),
        ("implementation_digest", pa.string()),
        ("config_digest", pa.string()),
        ("input_digest", pa.string()),
        ("fleetgrade_version", pa.string()),
    ]
)

RUNS = pa.schema(
    [
        ("run_id", pa.string()),
        ("attempt", pa.int32()),
        ("created_at", pa.string()),
        ("repository", pa.string()),
        ("metadata_source", pa.string()),
        ("source_kind", pa.string()),
        ("root", pa.string()),
        ("graders", pa.int32()),
        ("passed", pa.int32()),
        ("failed", pa.int32()),
        ("errors", pa.int32()),
        ("unavailable", pa.int32()),
        ("total_input_tokens", pa.float64()),
        ("total_output_tokens", pa.float64()),
        ("total_duration_ms", pa.float64()),
        ("steps", pa.int64()),
        ("tool_calls", pa.int64()),
        ("artifacts", pa.int64()),
        ("bytes_read", pa.int64()),
        ("warnings", pa.list_(pa.string())),
        ("input_digest", pa.string()),
        ("config_digest", pa.string()),
        ("fleetgrade_version", pa.string()),
    ]
)

DEAD_LETTER = pa.schema(
    [
        ("input", pa.string()),
        ("run_id", pa.string()),
        ("stage", pa.string()),
        ("error_class", pa.string()),
        ("message", pa.string()),
        ("fleetgrade_version", pa.string()),
    ]
)

TABLES: dict[str, pa.Schema] = {
    "grader_results": GRADER_RESULTS,
    "runs": RUNS,
    "dead_letter": DEAD_LETTER,
}

# Rows are sorted by these columns inside a partition, so files are deterministic.
SORT_KEYS: dict[str, tuple[str, ...]] = {
    "grader_results": ("run_id", "attempt", "grader_index", "grader_id"),
    "runs": ("run_id", "attempt"),
    "dead_letter": ("input", "stage"),
}


# How a rewrite of a partition treats the rows already in it (transforms/sink.py):
# - IDENTITY tables merge: an old row survives unless a new row, or a regraded run, has its
#   identity (these columns, within the partition);
# - REPLACE_TABLE tables are recomputed whole: partitions that get no rows are deleted.
IDENTITY: dict[str, tuple[str, ...]] = {
    "grader_results": ("run_id", "attempt"),
    "runs": ("run_id", "attempt"),
    "dead_letter": ("input", "stage"),
}
REPLACE_TABLE: set[str] = set()


def register_table(
    name: str,
    schema: pa.Schema,
    sort_keys: tuple[str, ...],
    identity: tuple[str, ...] | None = None,
    replace_table: bool = False,
) -> None:
    """Other table families (trace verdicts, observations, state…) add themselves here."""
    TABLES[name] = schema
    SORT_KEYS[name] = sort_keys
    if identity is not None:
        IDENTITY[name] = identity
    if replace_table:
        REPLACE_TABLE.add(name)


def public_tables() -> list[str]:
    """Tables for readers (SQL views, BigQuery DDL, reports); ``_``-prefixed ones are internal."""
    return sorted(t for t in TABLES if not t.startswith("_"))


def _register_families() -> None:
    """Every table family registers here, so any process that writes (a Dataflow worker running
    only the sink, say) knows every table without importing the modules that produce rows."""
    from schemas.observation_table import OBSERVATION_KEY, OBSERVATION_SCHEMA
    from schemas.state_table import STATE_SCHEMA, STATE_TABLE
    from schemas.stats_tables import GRADER_STATS_FILE, REGRESSIONS_FILE
    from schemas.trace_tables import TASK_RELIABILITY, TRACE_VERDICTS, file_schema

    register_table("trace_verdicts", file_schema(TRACE_VERDICTS), ("run_id", "attempt"),
                   identity=("run_id", "attempt"))
    # An aggregate over every run of a task: recomputed whole on each run, never merged.
    register_table("task_reliability", file_schema(TASK_RELIABILITY), ("task",), replace_table=True)
    # Observations accumulate: a row goes only when a new row has its (run, attempt, digest, time).
    register_table("observations", file_schema(OBSERVATION_SCHEMA), (*OBSERVATION_KEY, "attempt"),
                   identity=("run_id", "attempt", "evaluator_digest", "evidence_at"))
    # A row per run folder, in its run's partition (so no worker holds the whole fleet's state),
    # rewritten whole on each run: every row is carried, replaced or dropped (transforms/incremental.py).
    register_table(STATE_TABLE, STATE_SCHEMA, ("root",), replace_table=True)
    # Statistics per window ending on the partition's date: a recomputed cell replaces its row;
    # cells whose windows hold no regraded run are not recomputed and stay (transforms/stats.py).
    register_table("grader_stats", GRADER_STATS_FILE, ("grader_id", "window_days"),
                   identity=("grader_id", "window_days"))
    # One row per (workflow, grader) for its latest window; q-values span every row, so the
    # table is rewritten whole on each run (rows of untouched workflows are carried).
    register_table("regressions", REGRESSIONS_FILE, ("grader_id",), replace_table=True)


_register_families()
