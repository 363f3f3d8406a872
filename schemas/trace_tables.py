"""Arrow schemas of the trace-rule tables (README.md, "Tables"): ``trace_verdicts`` and ``task_reliability``.

Both list ``workflow`` and ``date`` first. They are the hive partition columns: a writer that
stores them in the path drops them from the file with :func:`schemas.partitions.file_schema`.
"""

from __future__ import annotations

import pyarrow as pa

FLAG = pa.struct(
    [
        ("check", pa.string()),
        ("severity", pa.string()),
        ("step", pa.int64()),
        ("tool", pa.string()),  # null for excessive_steps
        ("detail", pa.string()),
    ]
)

TRACE_VERDICTS = pa.schema(
    [
        ("workflow", pa.string()),
        ("date", pa.string()),
        ("run_id", pa.string()),
        ("attempt", pa.int32()),
        ("task", pa.string()),
        ("verdict", pa.string()),
        ("delivered", pa.bool_()),
        ("step_count", pa.int64()),
        ("corrupt_success", pa.bool_()),
        ("flags", pa.list_(FLAG)),
        ("fleetgrade_version", pa.string()),
    ]
)

# One estimate per k = 1..K; both values are null when k exceeds the number of reruns n.
PASS_K = pa.struct([("k", pa.int32()), ("pass_hat_k", pa.float64()), ("pass_at_k", pa.float64())])

TASK_RELIABILITY = pa.schema(
    [
        ("workflow", pa.string()),
        ("date", pa.string()),
        ("task", pa.string()),
        ("n", pa.int64()),
        ("c", pa.int64()),
        ("pass_hat_k_strict", pa.bool_()),
        ("pass_k", pa.list_(PASS_K)),
        ("fleetgrade_version", pa.string()),
    ]
)

