"""Arrow schemas of the fleet-statistics tables (docs/statistics.md): ``grader_stats`` and
``regressions``. ``workflow`` and ``date`` come first; they are the hive partition columns
(``date`` is the last day of the window) and :func:`file_schema` drops them from the files."""

from __future__ import annotations

import pyarrow as pa

from schemas.partitions import file_schema

# pass^k over the tasks with at least k gated values, with Wilson's interval over tasks.
PASS_K_INTERVAL = pa.struct([("k", pa.int32()), ("value", pa.float64()), ("low", pa.float64()),
                             ("high", pa.float64()), ("tasks", pa.int64())])

GRADER_STATS = pa.schema(
    [
        ("workflow", pa.string()),
        ("date", pa.string()),
        ("grader_id", pa.string()),
        ("window_days", pa.int32()),
        ("start_date", pa.date32()),
        ("unit", pa.string()),
        ("direction", pa.string()),
        ("n", pa.int64()),
        ("n_tasks", pa.int64()),
        ("n_unavailable", pa.int64()),
        ("n_error", pa.int64()),
        ("mean", pa.float64()),
        ("sd", pa.float64()),
        ("se_clustered", pa.float64()),
        ("ci_low", pa.float64()),
        ("ci_high", pa.float64()),
        ("p10", pa.float64()),
        ("p50", pa.float64()),
        ("p90", pa.float64()),
        ("pass_n", pa.int64()),
        ("pass_count", pa.int64()),
        ("pass_rate", pa.float64()),
        ("pass_low", pa.float64()),
        ("pass_high", pa.float64()),
        ("pass_k", pa.list_(PASS_K_INTERVAL)),
        ("fleetgrade_version", pa.string()),
    ]
)

REGRESSIONS = pa.schema(
    [
        ("workflow", pa.string()),
        ("date", pa.string()),
        ("grader_id", pa.string()),
        ("window_days", pa.int32()),
        ("baseline_days", pa.int32()),
        ("current_start", pa.date32()),
        ("baseline_start", pa.date32()),
        ("baseline_end", pa.date32()),
        ("unit", pa.string()),
        ("direction", pa.string()),
        ("n_current", pa.int64()),
        ("n_baseline", pa.int64()),
        ("tasks_current", pa.int64()),
        ("tasks_baseline", pa.int64()),
        ("mean_current", pa.float64()),
        ("mean_baseline", pa.float64()),
        ("diff", pa.float64()),
        ("diff_low", pa.float64()),
        ("diff_high", pa.float64()),
        ("effect_size", pa.float64()),
        ("test", pa.string()),
        ("p_value", pa.float64()),
        ("q_value", pa.float64()),
        ("mde", pa.float64()),
        ("verdict", pa.string()),
        ("runs_needed", pa.int64()),
        ("change_date", pa.date32()),
        ("fleetgrade_version", pa.string()),
    ]
)

GRADER_STATS_FILE = file_schema(GRADER_STATS)
REGRESSIONS_FILE = file_schema(REGRESSIONS)
