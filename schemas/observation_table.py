"""Arrow schema of the ``observations`` table: operational-value regrades at an evidence time.

One row per (run_id, evaluator_digest, evidence_at); rows are added by regrades and never
modify the original ``grader_results``. Timestamps are UTC; JSON columns hold key-sorted JSON
text. Attainment-only columns (case, opportunity_key, evidence_cutoff, matures_at, mature,
provenance, baseline_value, delta_from_baseline) are null for the newest metric-array protocol.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

UTC_TIMESTAMP = pa.timestamp("us", tz="UTC")
METRIC = pa.struct([pa.field("id", pa.string(), nullable=False), pa.field("value", pa.float64())])

OBSERVATION_SCHEMA = pa.schema(
    [
        pa.field("workflow", pa.string(), nullable=False),
        pa.field("date", pa.string(), nullable=False),  # YYYY-MM-DD, the hive partition value
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("attempt", pa.int32(), nullable=False),
        pa.field("evaluator_digest", pa.string(), nullable=False),
        pa.field("evidence_at", UTC_TIMESTAMP, nullable=False),
        pa.field("value", pa.float64()),  # null means no evidence, never 0
        pa.field("status", pa.string(), nullable=False),  # pass | fail | error | unavailable
        pa.field("message", pa.string()),
        pa.field("error", pa.string()),
        pa.field("metrics", pa.list_(METRIC)),
        pa.field("case", pa.string()),  # JSON text
        pa.field("opportunity_key", pa.string()),
        pa.field("evidence_cutoff", UTC_TIMESTAMP),
        pa.field("matures_at", UTC_TIMESTAMP),
        pa.field("mature", pa.bool_()),
        pa.field("provenance", pa.string()),  # JSON text: [{repository, kind, ref}, …]
        pa.field("baseline_value", pa.float64()),
        pa.field("delta_from_baseline", pa.float64()),
        pa.field("fleetgrade_version", pa.string(), nullable=False),
    ]
)

OBSERVATION_KEY = ("run_id", "evaluator_digest", "evidence_at")


def observations_table(rows: list[dict[str, Any]]) -> pa.Table:
    """Rows (as returned by ``graders.families.opvalue.regrade.regrade``) sorted by key, as an Arrow table."""
    ordered = sorted(rows, key=lambda r: tuple(r[k] for k in OBSERVATION_KEY))
    return pa.Table.from_pylist(ordered, schema=OBSERVATION_SCHEMA)
