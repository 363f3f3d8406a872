"""The output tables: one :class:`TableSpec` per table, declared once in ``SPECS``.

Every consumer derives from the specs: the sink (sort key, identity, replace policy), the
incremental drops (graders/tables/state.py), ``fleetgrade sql`` and report views (``optional``
tables only when present), the BigQuery DDL. Column order is the file order. Partition columns (``workflow``,
``date``) are not stored in the files: they live in the hive path
``<table>/workflow=<w>/date=<YYYY-MM-DD>/`` (graders/tables/paths.py); readers add them back.

The specs sit in the lowest layer so that every process that writes or reads (a Dataflow worker
running only the sink, say) knows every table. Rows are built in higher layers (the grading core,
the trace rules, the statistics), so a spec names its row builder (``module:function``) instead
of importing it; a test resolves every name.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import pyarrow as pa

from schemas.observation_table import OBSERVATION_KEY, OBSERVATION_SCHEMA, UTC_TIMESTAMP
from schemas.partitions import PARTITION_COLUMNS, PARTITION_SCHEMA, file_schema
from schemas.state_table import STATE_SCHEMA, STATE_TABLE
from schemas.stats_tables import GRADER_STATS_FILE, REGRESSIONS_FILE
from schemas.trace_tables import TASK_RELIABILITY, TRACE_VERDICTS

__all__ = ["PARTITION_COLUMNS", "PARTITION_SCHEMA", "SPECS", "Replace", "TableSpec", "public_tables", "run_tables"]

METRIC = pa.struct([("id", pa.string()), ("value", pa.float64())])
MODEL_CALLS = pa.struct([("model", pa.string()), ("calls", pa.int64())])

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
        ("created_at", UTC_TIMESTAMP),
        ("repository", pa.string()),
        ("metadata_source", pa.string()),
        ("source_kind", pa.string()),
        ("root", pa.string()),
        ("graders", pa.int64()),
        ("passed", pa.int64()),
        ("failed", pa.int64()),
        ("errors", pa.int64()),
        ("unavailable", pa.int64()),
        ("total_input_tokens", pa.int64()),
        ("total_output_tokens", pa.int64()),
        ("total_duration_ms", pa.float64()),
        ("steps", pa.int64()),
        ("tool_calls", pa.int64()),
        ("artifacts", pa.int64()),
        ("bytes_read", pa.int64()),
        # What the run cost: the cost graders' values (docs/observed-graders.md, "Cost"), null where
        # a grader is unavailable: the agent's tokens by class (each token once), its model calls
        # and their models, and its AI Credits as the logs state them.
        ("tokens_input", pa.int64()),
        ("tokens_output", pa.int64()),
        ("tokens_cache_read", pa.int64()),
        ("tokens_cache_write", pa.int64()),
        ("tokens_reasoning", pa.int64()),
        ("model_calls", pa.int64()),
        ("models", pa.list_(MODEL_CALLS)),
        ("ai_credits", pa.float64()),
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


class Replace(enum.Enum):
    """How a job's rows replace the rows already in a partition (transforms/sink.py)."""

    # Rows of a graded run, identified by (run_id, attempt): a regraded run's earlier rows are
    # dropped (graders/tables/state.drops_for) and a new row replaces the row of its identity.
    RUN = "run"
    # A new row, or an explicit drop, replaces the stored row of its identity; the rest stay.
    ROW = "row"
    # Recomputed whole on each job: partitions that get no rows are deleted.
    TABLE = "table"


RUN_IDENTITY = ("run_id", "attempt")

# gh-aw's archived grade beside fleetgrade's recomputation, for each grader where they differ
# (graders/tables/drift.py); no row where they agree.
GRADER_DRIFT = pa.schema(
    [
        ("run_id", pa.string()),
        ("attempt", pa.int32()),
        ("grader_id", pa.string()),
        ("differs", pa.list_(pa.string())),
        ("archived_value", pa.float64()),
        ("archived_status", pa.string()),
        ("archived_message", pa.string()),
        ("value", pa.float64()),
        ("status", pa.string()),
        ("message", pa.string()),
        ("archived_path", pa.string()),
        ("fleetgrade_version", pa.string()),
    ]
)


# Runs that cost more than k× their workflow's rolling median (graders/stats/outliers.py).
COST_OUTLIERS = pa.schema(
    [
        ("run_id", pa.string()),
        ("attempt", pa.int32()),
        ("metric", pa.string()),  # ai-credits, or tokens for a run whose logs state no credits
        ("value", pa.float64()),
        ("baseline_median", pa.float64()),
        ("ratio", pa.float64()),  # value / baseline_median
        ("baseline_runs", pa.int64()),
        ("baseline_start", pa.date32()),
        ("baseline_end", pa.date32()),
        ("factor", pa.float64()),  # k (`fleetgrade run --outlier-factor`)
        ("window_days", pa.int64()),  # N (`--outlier-days`)
        ("repository", pa.string()),
        ("run_url", pa.string()),
        ("fleetgrade_version", pa.string()),
    ]
)


@dataclass(frozen=True)
class TableSpec:
    """One output table."""

    name: str  # a ``_`` prefix marks an internal table, never shown to readers
    schema: pa.Schema  # of the files: no partition columns
    sort_key: tuple[str, ...]  # rows are sorted so inside a partition: files are deterministic
    replace: Replace
    builder: str  # ``module:function`` that builds the rows
    description: str
    identity: tuple[str, ...] = ()  # a row's identity within its partition (RUN and ROW tables)
    # New rows sharing an identity: only the least by these columns is written (several grader
    # families may fail on one run, which is still one dead letter).
    one_per_identity: tuple[str, ...] = ()
    optional: bool = False  # not written by every ``fleetgrade run``: readers do without it

    def __post_init__(self) -> None:
        names = set(self.schema.names)
        missing = [c for c in (*self.sort_key, *self.identity, *self.one_per_identity) if c not in names]
        if missing:
            raise ValueError(f"table {self.name}: columns {missing} are not in its schema")
        if (self.replace is Replace.TABLE) == bool(self.identity):
            raise ValueError(f"table {self.name}: an identity is what RUN and ROW tables replace by")
        if self.replace is Replace.RUN and self.identity != RUN_IDENTITY:
            raise ValueError(f"table {self.name}: a run's rows are identified by {RUN_IDENTITY}")

    @property
    def internal(self) -> bool:
        return self.name.startswith("_")


def _specs(*specs: TableSpec) -> dict[str, TableSpec]:
    return {s.name: s for s in specs}


SPECS: dict[str, TableSpec] = _specs(
    TableSpec("grader_results", GRADER_RESULTS, ("run_id", "attempt", "grader_index", "grader_id"), Replace.RUN,
              "graders.tables.rows:result_rows", "One row per (run, grader): its value, status and provenance.",
              identity=RUN_IDENTITY),
    TableSpec("runs", RUNS, ("run_id", "attempt"), Replace.RUN, "graders.tables.rows:run_row",
              "One row per graded run: its metadata, status counts and trace totals.", identity=RUN_IDENTITY),
    TableSpec("dead_letter", DEAD_LETTER, ("input", "stage"), Replace.ROW, "graders.tables.rows:dead_letter_row",
              "One row per input that could not be graded, and why.", identity=("input", "stage"),
              one_per_identity=("error_class", "message")),
    TableSpec("trace_verdicts", file_schema(TRACE_VERDICTS), ("run_id", "attempt"), Replace.RUN,
              "graders.one_run:verdict_row", "One trace-rule verdict per graded run.",
              identity=RUN_IDENTITY),
    # Only runs that carry gh-aw's grader_results.json and disagree with it have rows: often none.
    TableSpec("grader_drift", GRADER_DRIFT, ("run_id", "attempt", "grader_id"), Replace.RUN,
              "graders.tables.drift:drift_rows",
              "One row per (run, grader) whose archived gh-aw grade fleetgrade's recomputation does not repeat.",
              identity=RUN_IDENTITY, optional=True),
    # An aggregate over every run of a task: recomputed whole on each run, never merged.
    TableSpec("task_reliability", file_schema(TASK_RELIABILITY), ("task",), Replace.TABLE,
              "transforms.reliability:task_reliability_row", "pass^k and pass@k per task."),
    # Observations accumulate: a row goes only when a new row has its (run, attempt, digest, time).
    TableSpec("observations", file_schema(OBSERVATION_SCHEMA), (*OBSERVATION_KEY, "attempt"), Replace.ROW,
              "graders.families.opvalue.regrade:regrade",
              "Operational-value regrades of a run at an evidence time (fleetgrade regrade).",
              identity=("run_id", "attempt", "evaluator_digest", "evidence_at"), optional=True),
    # A row per run folder, in its run's partition (so no worker holds the whole fleet's state),
    # rewritten whole on each run: every row is carried, replaced or dropped (transforms/incremental.py).
    TableSpec(STATE_TABLE, STATE_SCHEMA, ("root",), Replace.TABLE, "graders.tables.state:graded_state",
              "What graded each run folder, so a rerun redoes only what changed."),
    # Statistics per window ending on the partition's date: a recomputed cell replaces its row;
    # cells whose windows hold no regraded run are not recomputed and stay (transforms/stats.py).
    TableSpec("grader_stats", GRADER_STATS_FILE, ("grader_id", "window_days"), Replace.ROW,
              "graders.stats.cells:stats_rows", "Per-grader statistics over windows ending on the date.",
              identity=("grader_id", "window_days")),
    # One row per (workflow, grader) for its latest window; q-values span every row, so the
    # table is rewritten whole on each run (rows of untouched workflows are carried).
    TableSpec("regressions", REGRESSIONS_FILE, ("grader_id",), Replace.TABLE, "graders.stats.cells:regression_row",
              "Per (workflow, grader): its latest window against its baseline."),
    # Partitions whose verdicts a job's runs can change are recomputed whole (their stored rows
    # dropped first); the others stay (transforms/cost.py). Only outliers have rows: often none.
    TableSpec("cost_outliers", COST_OUTLIERS, ("run_id", "attempt"), Replace.ROW, "graders.stats.outliers:outlier_rows",
              "Runs whose AI Credits (else tokens) exceed k× their workflow's median over the N days before.",
              identity=("run_id", "attempt"), optional=True),
)


def run_tables() -> list[str]:
    """Tables whose rows belong to a graded run: a regraded run's earlier rows are dropped."""
    return [name for name, spec in SPECS.items() if spec.replace is Replace.RUN]


def public_tables() -> list[str]:
    """Tables for readers (SQL views, BigQuery DDL, reports); ``_``-prefixed ones are internal."""
    return sorted(name for name, spec in SPECS.items() if not spec.internal)
