"""Arrow schema of the incremental-backfill state (``<output>/_state/workflow=…/date=…/part-00000.parquet``)."""

from __future__ import annotations

import pyarrow as pa

STATE_TABLE = "_state"
STATE_SCHEMA = pa.schema(
    [
        ("root", pa.string()),
        ("listing_digest", pa.string()),
        ("grading_digest", pa.string()),
        ("outcome", pa.string()),  # graded | dead
        ("workflow", pa.string()),
        ("date", pa.string()),
        ("run_id", pa.string()),
        ("attempt", pa.int32()),
        ("fleetgrade_version", pa.string()),
    ]
)
