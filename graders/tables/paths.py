"""Where a table's rows live: the one module that builds and parses partition paths.

A table's partition is ``<table>/workflow=<w>/date=<d>/`` holding one file, ``PART_NAME``. Values
are percent-encoded, hive's null spelling stands for None, and a value whose segment would not
fit a file name (or would read back as null or as a hashed value) is hashed, the value itself
kept in the partition's files (``ORIGINAL_COLUMN``). Writers (the sink) and readers (incremental
state, statistics, ``fleetgrade sql``) all go through here, so both sides agree on every name.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Callable
from typing import NamedTuple
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.parquet as pq

PART_NAME = "part-00000.parquet"
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
NAME_MAX = 255  # bytes in one path segment (ext4, xfs, GCS's limit on an object name is longer)
_SAFE = " -_.~+@"
_DIGEST_HEX = 32
# The tail of a hashed value: "~" and 32 hex digits; no value is written so except by hashing.
_HASHED = re.compile(r"~[0-9a-f]{" + str(_DIGEST_HEX) + r"}\Z")
# Where a hashed partition's files keep the value itself (readers take it over the path's).
ORIGINAL_COLUMN = "workflow_name"


def partition_value(value: str | None, key: str = "workflow") -> str:
    """The one encoding of a partition value in a ``<key>=<value>`` path segment.

    Percent-encoded (readers decode it), with hive's spelling of null for None. A value whose
    encoding would not fit ``NAME_MAX`` bytes with its key, or would read back as null or as a
    hashed value, is written as a prefix of its encoding, "~" and 32 hex digits of its SHA-256:
    so the encoding is injective, every segment fits, and no value reads back as null. The
    value itself is then kept in the partition's files (``ORIGINAL_COLUMN``).
    """
    if value is None or value == "":
        return HIVE_NULL
    text = quote(value, safe=_SAFE)
    limit = NAME_MAX - len(key) - 1
    if len(text) <= limit and text != HIVE_NULL and not _HASHED.search(text):
        return text
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_HEX]
    room = limit - _DIGEST_HEX - 1
    prefix: list[str] = []  # whole characters, so the prefix reads back as text
    for char in value:
        piece = quote(char, safe=_SAFE)
        room -= len(piece)
        if room < 0:
            break
        prefix.append(piece)
    return f"{''.join(prefix)}~{digest}"


def is_hashed(encoded: str) -> bool:
    """Whether a segment's value is a hashed one: the value itself is in ``ORIGINAL_COLUMN``."""
    return _HASHED.search(encoded) is not None


def keeps_original(workflow: str | None) -> bool:
    """Whether a partition of this workflow keeps the name in its files (its segment is hashed)."""
    return bool(workflow) and is_hashed(partition_value(workflow))


def decode_partition_value(encoded: str) -> str | None:
    """What a reader of hive paths sees for a segment's value (for a hashed one, its prefix)."""
    return None if encoded == HIVE_NULL else unquote(encoded)


def partition_path(table: str, workflow: str | None, date: str | None) -> str:
    """A partition's folder, relative to the output folder."""
    return f"{table}/workflow={partition_value(workflow)}/date={partition_value(date, 'date')}"


def partition_file(table: str, workflow: str | None, date: str | None) -> str:
    """A partition's one file, relative to the output folder."""
    return f"{partition_path(table, workflow, date)}/{PART_NAME}"


def partition_glob(table: str, name: str = PART_NAME) -> str:
    """The glob (relative to the output folder) of a table's partition files named ``name``."""
    return f"{table}/*/*/{name}"


def table_globs(table: str, name: str = PART_NAME) -> list[str]:
    """Globs (relative to the output folder) of a table's files: ``name`` in each partition, and
    ``<table>/part-00000.parquet``, a table's one file from before it was partitioned (``_state``
    of earlier builds), which is read like a partition and replaced by the partitions written."""
    return [partition_glob(table, name), f"{table}/{PART_NAME}"]


def reader_glob(table: str) -> str:
    """The glob SQL readers (DuckDB, BigQuery's hive layout) read a table's partitions with."""
    return partition_glob(table, "*.parquet")


class PartitionPath(NamedTuple):
    """A parsed partition path: the table, the segments' encoded values, and the file's name."""

    table: str
    workflow: str  # the segments' values as encoded (decode_partition_value reads them)
    date: str
    name: str

    @property
    def hashed(self) -> bool:
        return is_hashed(self.workflow)


def parse_partition(path: str) -> PartitionPath | None:
    """``…/<table>/workflow=<w>/date=<d>/<name>`` → its parts; None for any other path."""
    parts = path.split("/")
    if len(parts) < 4:
        return None
    table, workflow, date, name = parts[-4:]
    if not (workflow.startswith("workflow=") and date.startswith("date=")) or not table or not name:
        return None
    return PartitionPath(table, workflow[len("workflow="):], date[len("date="):], name)


def partition_values(path: str, data: bytes | Callable[[], bytes | None] | None = None,
                     ) -> tuple[str | None, str | None]:
    """(workflow, date) of a partition file: as its hive path gives them, but for a hashed
    workflow, which its file's ``data`` keeps whole (``data`` may be a reader, called only then)."""
    parsed = parse_partition(path)
    if parsed is None:  # a table's one file from before it was partitioned
        return None, None
    workflow = decode_partition_value(parsed.workflow)
    if data is not None and parsed.hashed:
        content = data() if callable(data) else data
        workflow = (stored_original(content) if content is not None else None) or workflow
    return workflow, decode_partition_value(parsed.date)


def stored_original(data: bytes) -> str | None:
    """The partition value kept in a hashed partition's file, if it has one (None when the file
    cannot be read: readers that decode it name it, graders/tables/parquet.DamagedOutput)."""
    source = io.BytesIO(data)
    try:
        if ORIGINAL_COLUMN not in pq.read_schema(source).names:
            return None
        column = pq.read_table(source, columns=[ORIGINAL_COLUMN]).column(0)
    except (pa.ArrowException, OSError, ValueError):
        return None
    return next((v for v in column.to_pylist() if v is not None), None)
