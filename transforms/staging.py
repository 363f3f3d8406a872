"""Rows staged to shard files as they are produced; only chunk references cross the shuffle.

Every shuffled or flattened row was held by the local runner until the write, so peak memory
grew with the fleet (make bench memory), even packed. :class:`StageRows` packs rows per
partition as they come (64 at a time; rows of one run repeat most columns, so chunks compress
~10x), writes chunks to a shard file under the job's staging folder, and outputs only their
references (Beam's file sinks do the same). A failed bundle's shard is never referenced; the
commit deletes the staging folder.

What waits in memory (rows not yet packed, packed chunks not yet written) is bounded per
process, over every table's :class:`StageRows` together (:class:`StagingBudget`), not per
table: with a bound per table, a table with few rows (dead letters, states) filled its own
buffers over the whole fleet, and the worker's peak grew with the fleet's size until every
table's buffers were full (make bench memory).
"""

from __future__ import annotations

import functools
import pickle
import struct
import threading
import uuid
import zlib
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.windowed_value import WindowedValue

from transforms.beamfiles import join, pool, read_if_exists, scheme, write_file

PartitionKey = tuple[str, str | None, str | None]
# A reference to one partition's packed chunks in one staged shard file: the shard's 16-byte id
# (its file is <staging>/_shards/<table>-<id hex>), then (offset, length) of each chunk, as
# little-endian uint64s. Bytes, not a tuple: references cross the shuffle once per partition
# and shard, and the local runner holds a shuffle decoded, where a tuple of tuples took ~10x
# the bytes (make bench memory).
ChunkRef = bytes
_SHARD_ID = 16
SHARDS = "_shards"  # under the job's staging folder; no table has this name

CHUNK_ROWS = 64  # rows of one partition packed together: ~10x compression, bounded memory
PENDING_ROWS = 1024  # rows waiting unpacked, over every StageRows of a process
PACKED_BYTES = 1 << 20  # packed chunks waiting to be written, over every StageRows of a process
UPLOADS_AHEAD = 8  # shards uploading at once on an object store (their bytes count beside PACKED_BYTES)


def chunk_ref(shard: bytes, spans: list[tuple[int, int]]) -> ChunkRef:
    return shard + struct.pack(f"<{2 * len(spans)}Q", *(n for span in spans for n in span))


def ref_spans(ref: ChunkRef) -> tuple[bytes, list[tuple[int, int]]]:
    """(shard id, chunk spans) of a reference."""
    flat = struct.unpack_from(f"<{(len(ref) - _SHARD_ID) // 8}Q", ref, _SHARD_ID)
    return ref[:_SHARD_ID], list(zip(flat[::2], flat[1::2], strict=True))


def shard_path(staging: str, table: str, shard: bytes) -> str:
    return join(staging, f"{SHARDS}/{table}-{shard.hex()}")


def read_chunks(staging: str, table: str, refs: Iterable[ChunkRef]) -> Iterator[dict[str, Any]]:
    """The rows of ``table``'s chunks staged under ``staging``, one open file per shard."""
    by_shard: dict[bytes, list[tuple[int, int]]] = {}
    for ref in refs:
        shard, spans = ref_spans(ref)
        by_shard.setdefault(shard, []).extend(spans)
    for shard in sorted(by_shard):
        path = shard_path(staging, table, shard)
        if scheme(path) == "gs":  # one request for the shard (~1 MiB), not one per chunk
            data = _shard(path)
            for offset, length in sorted(by_shard[shard]):
                yield from pickle.loads(zlib.decompress(data[offset : offset + length]))
            continue
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as fh:
            for offset, length in sorted(by_shard[shard]):
                fh.seek(offset)
                yield from pickle.loads(zlib.decompress(fh.read(length)))


@functools.lru_cache(maxsize=16)
def _shard(path: str) -> bytes:
    """A staged shard on an object store, kept for the next partitions that read it (a shard holds
    chunks of many partitions; shards are never rewritten, their names are new)."""
    data = read_if_exists(path)
    if data is None:
        raise FileNotFoundError(f"{path}: staged shard missing")
    return data


def _pack(rows: list[dict[str, Any]]) -> bytes:
    return zlib.compress(pickle.dumps(rows, pickle.HIGHEST_PROTOCOL), 1)


class _Held:
    """One StageRows's rows and chunks, in memory until packed and written."""

    def __init__(self, table: str, staging: str) -> None:
        self.table, self.staging = table, staging
        self.pending: dict[PartitionKey, list[dict[str, Any]]] = {}
        self.pending_rows = 0
        self.chunks: list[tuple[PartitionKey, bytes]] = []
        self.size = 0
        # References of chunks written while this StageRows was not running (by the budget,
        # from another StageRows's step); it outputs them at its next element or bundle end.
        self.ready: list[tuple[PartitionKey, ChunkRef]] = []
        self.uploads: list[Future[None]] = []  # its shards being uploaded (object stores)


class StagingBudget:
    """Rows waiting and chunks packed by every StageRows of a process, bounded together.

    When a bound is passed, the holders of the most are packed (or written) first, down to
    half the bound, so that a busy table's shards stay large and a quiet table's rows do not
    wait for the whole fleet. One lock: the SDK harness may run bundles on several threads,
    and a holder's rows can be packed and written from another StageRows's step.
    """

    def __init__(self, rows: int = PENDING_ROWS, packed: int = PACKED_BYTES) -> None:
        self.max_rows, self.max_bytes = rows, packed
        self.lock = threading.Lock()
        self.holders: list[_Held] = []
        self.rows = 0
        self.bytes = 0
        self.uploads: list[Future[None]] = []  # shards being uploaded, at most UPLOADS_AHEAD

    def enter(self, held: _Held) -> None:
        self.holders.append(held)

    def leave(self, held: _Held) -> None:
        """``held`` no longer counts (its bundle ended, or failed: what it held is dropped)."""
        if any(h is held for h in self.holders):
            self.rows -= held.pending_rows
            self.bytes -= held.size
            self.holders = [h for h in self.holders if h is not held]

    def add(self, held: _Held, key: PartitionKey, row: dict[str, Any]) -> None:
        rows = held.pending.setdefault(key, [])
        rows.append(row)
        held.pending_rows += 1
        self.rows += 1
        if len(rows) >= CHUNK_ROWS:
            self._pack_one(held, key)
        if self.rows > self.max_rows:
            for h in sorted(self.holders, key=lambda h: h.pending_rows, reverse=True):
                if self.rows <= self.max_rows // 2:
                    break
                self.pack(h)
        if self.bytes > self.max_bytes:
            for h in sorted(self.holders, key=lambda h: h.size, reverse=True):
                if self.bytes <= self.max_bytes // 2:
                    break
                self.write(h)

    def _pack_one(self, held: _Held, key: PartitionKey) -> None:
        rows = held.pending.pop(key)
        held.pending_rows -= len(rows)
        self.rows -= len(rows)
        data = _pack(rows)
        held.chunks.append((key, data))
        held.size += len(data)
        self.bytes += len(data)

    def pack(self, held: _Held) -> None:
        """Every waiting row of ``held`` into chunks."""
        for key in list(held.pending):
            self._pack_one(held, key)

    def write(self, held: _Held) -> None:
        """``held``'s chunks into one new shard file; their references go to ``held.ready``."""
        if not held.chunks:
            return
        shard = uuid.uuid4().bytes
        # One reference per partition and shard, not per chunk: with a long history a chunk
        # holds a few rows, and a reference per chunk made the shuffle grow with the rows.
        spans: dict[PartitionKey, list[tuple[int, int]]] = {}
        offset = 0
        for key, data in held.chunks:
            spans.setdefault(key, []).append((offset, len(data)))
            offset += len(data)
        path, data = shard_path(held.staging, held.table, shard), b"".join(data for _, data in held.chunks)
        if scheme(path) == "gs":  # uploaded behind; the holder's bundle ends once its shards are written
            while len(self.uploads) >= UPLOADS_AHEAD:
                self.uploads.pop(0).result()
            upload = pool().submit(write_file, path, data)
            self.uploads.append(upload)
            held.uploads.append(upload)
        else:
            write_file(path, data)
        self.bytes -= held.size
        held.chunks, held.size = [], 0
        held.ready += [(key, chunk_ref(shard, s)) for key, s in spans.items()]


_BUDGETS: dict[tuple[int, int], StagingBudget] = {}
_BUDGETS_LOCK = threading.Lock()


def process_budget(rows: int = PENDING_ROWS, packed: int = PACKED_BYTES) -> StagingBudget:
    """The budget shared by this process's StageRows of these bounds (one in production)."""
    with _BUDGETS_LOCK:
        return _BUDGETS.setdefault((rows, packed), StagingBudget(rows, packed))


class StageRows(beam.DoFn):
    """Rows → (partition, chunk reference): rows leave through staged files, not the shuffle."""

    def __init__(self, table: str, staging: str, pending_rows: int = PENDING_ROWS,
                 packed_bytes: int = PACKED_BYTES) -> None:
        self.table = table
        self.staging = staging
        self.bounds = (pending_rows, packed_bytes)

    def setup(self) -> None:
        self.budget = process_budget(*self.bounds)
        self.held = _Held(self.table, self.staging)

    def start_bundle(self) -> None:
        with self.budget.lock:
            self.budget.leave(self.held)  # a failed bundle's, if it never finished
            self.held = _Held(self.table, self.staging)
            self.budget.enter(self.held)

    def process(self, row: dict[str, Any]) -> Iterator[tuple[PartitionKey, ChunkRef]]:
        key = (self.table, row.get("workflow"), row.get("date"))
        held = self.held
        with self.budget.lock:
            self.budget.add(held, key, row)
            ready, held.ready = held.ready, []
        yield from ready

    def finish_bundle(self) -> Iterator[WindowedValue]:
        held = self.held
        with self.budget.lock:
            self.budget.pack(held)
            self.budget.write(held)
            self.budget.leave(held)
            ready, held.ready = held.ready, []
            uploads, held.uploads = held.uploads, []
        for upload in uploads:  # every shard its references name is written before they leave
            upload.result()
        for ref in ready:
            yield GlobalWindows.windowed_value(ref)

    def teardown(self) -> None:
        with self.budget.lock:
            self.budget.leave(self.held)
