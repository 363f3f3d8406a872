"""Hive-partitioned Parquet sink with atomic per-partition commit (docs/architecture.md, "Write").

Rows are packed into chunks per (table, workflow, date) and staged to shard files as they are
produced (``transforms/staging.py``); only chunk references are grouped per partition. Each
touched partition is rewritten as ONE file, as its table's spec says (``schemas.tables.SPECS``,
``graders.tables.merge``): the rows already in it that survive (an old row goes when a new row
or a drop has its identity) plus the new rows, sorted. The file is written to
``<output>/_staging/<job>/…``; after every partition is written, a single commit step checks that
the job still holds the output's lock (``transforms/output_lock.py``), moves each file over
``<table>/workflow=<w>/date=<d>/part-00000.parquet`` (an atomic replace of one object on local
disks and on GCS), deletes partitions left empty, and removes the job's own staging folder.

- A reader sees the previous or the new partition, never a mix inside one partition.
- A partition whose new bytes equal the old ones is not touched at all, so an unchanged rerun
  changes no file, not even its modification time.
- A job killed at any point leaves complete partitions only; the state file (written by the
  same commit, last) still describes the previous run, so the next run redoes the work and
  deletes the orphaned staging folder (its owner is gone; another live job's is kept).

(Beam's ``fileio.WriteToFiles`` left temporary files behind with such destinations.)
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from graders.tables.merge import partition_rows
from graders.tables.parquet import DamagedOutput, decode_table, encode_table
from graders.tables.paths import PART_NAME, parse_partition, partition_file, table_globs
from graders.tables.state import Drop
from schemas.state_table import STATE_TABLE
from schemas.tables import SPECS, Replace
from transforms.ahead import Ahead, windowed
from transforms.beamfiles import (
    delete_file,
    delete_files,
    join,
    pool,
    rename_files,
    scheme,
    write_file,
)
from transforms.heap import tune_heap
from transforms.incremental import name_damaged, read_stored
from transforms.output_lock import STAGING, check_holder, refuse_links
from transforms.staging import PartitionKey, StageRows, read_chunks

LOG = logging.getLogger("fleetgrade")
# Crash-safety tests kill the process after N commit operations (never set in production).
FAULT_ENV = "FLEETGRADE_FAULT_KILL_AFTER_COMMITS"
FAULT_SIGNAL_ENV = "FLEETGRADE_FAULT_SIGNAL"  # INT: Ctrl-C to the process group instead (tests of Ctrl-C)

# ("write" | "keep" | "delete" | "damaged", partition file path relative to output)
Action = tuple[str, str]
DAMAGED = "damaged"  # a stored partition that could not be read back: its runs are to be regraded
# A table's rows: one collection, or several that are staged each on its own (the local runner
# materializes a Flatten, which held a row per run of the fleet: make bench memory).
Rows = beam.PCollection | Sequence[beam.PCollection]


class TableWrites(NamedTuple):
    """What :class:`WriteTables` writes: {table name: its rows}, and the stored rows to drop."""

    tables: dict[str, Rows]
    drops: Rows = ()


def _key_drop(drop: Drop) -> tuple[PartitionKey, tuple[Any, ...]]:
    table, workflow, date, ident = drop
    return (table, workflow, date), ident


PARTITIONS_AHEAD = 8  # partitions read ahead of the one being merged, on an object store


class _WritePartition(beam.DoFn):
    def __init__(self, output: str, staging: str) -> None:
        self.output = output
        self.staging = staging
        self.files = Metrics.counter("fleetgrade", "partitions_written")
        self.unchanged = Metrics.counter("fleetgrade", "partitions_unchanged")
        self.rows = Metrics.counter("fleetgrade", "rows_written")
        self.damaged = Metrics.counter("fleetgrade", "partitions_damaged")

    def setup(self) -> None:
        tune_heap()  # a worker that only writes decodes and encodes partitions with Arrow too
        # On GCS the next partitions' reads run ahead and their uploads behind (transforms/ahead.py).
        self._remote = scheme(self.output) == "gs"
        self._ahead: Ahead[tuple[PartitionKey, Iterable[Any]]] = Ahead(PARTITIONS_AHEAD if self._remote else 0,
                                                                       self._start)
        self._uploads: list[Any] = []

    def _start(self, kv: tuple[PartitionKey, Iterable[Any]]) -> Any:
        return pool().submit(self._read, kv) if self._remote else None

    def _read(self, kv: tuple[PartitionKey, Iterable[Any]],
              ) -> tuple[list[Any], set[tuple[Any, ...]], bytes | DamagedOutput | None]:
        """A partition's new rows, its rows to drop, and its stored file (if any)."""
        (table, workflow, date), values = kv
        refs: list[bytes] = []
        drops: set[tuple[Any, ...]] = set()
        for value in values:  # a chunk reference (bytes), or the identity of a row to drop
            if isinstance(value, bytes):
                refs.append(value)
            else:
                drops.add(tuple(value))
        new_rows = list(read_chunks(self.staging, table, refs))
        try:
            existing: bytes | DamagedOutput | None = read_stored(join(self.output, partition_file(table, workflow, date)))
        except DamagedOutput as exc:  # no regular file: never opened (a FIFO blocked the job)
            existing = exc
        return new_rows, drops, existing

    def process(self, kv: tuple[PartitionKey, Iterable[Any]], timestamp: Any = beam.DoFn.TimestampParam,
                window: Any = beam.DoFn.WindowParam) -> Iterator[Action]:
        for ready, work in self._ahead.push(kv, timestamp, window):
            yield from self._write(ready, work)

    def finish_bundle(self) -> Any:
        out = [windowed(action, ts, window) for kv, work, ts, window in self._ahead.drain()
               for action in self._write(kv, work)]
        uploads, self._uploads = self._uploads, []
        for upload in uploads:  # the bundle is done once every file it staged is written
            upload.result()
        return out or None

    def _write(self, kv: tuple[PartitionKey, Iterable[Any]], work: Any) -> Iterator[Action]:
        (table, workflow, date), _ = kv
        new_rows, drops, existing = work.result() if work is not None else self._read(kv)
        rel = partition_file(table, workflow, date)
        stored = None
        try:
            if isinstance(existing, DamagedOutput):
                raise existing
            if existing is not None and SPECS[table].replace is not Replace.TABLE:  # TABLE: recomputed whole
                stored = decode_table(table, existing, join(self.output, rel))
        except DamagedOutput as exc:
            # Its rows are lost: rewritten from this job's, and the runs it held regraded (commit).
            name_damaged(exc, "rewritten from this job's rows, and the runs it held are regraded")
            self.damaged.inc()
            existing = existing if isinstance(existing, bytes) else b""  # replaced (or deleted) whatever it is
            yield DAMAGED, rel
        rows = partition_rows(SPECS[table], new_rows, stored, drops)
        if not rows:
            if existing is not None:
                yield "delete", rel
            return
        data = encode_table(table, rows, workflow)
        if data == existing:
            self.unchanged.inc()
            yield "keep", rel
            return
        if self._remote:
            self._uploads.append(pool().submit(write_file, join(self.staging, rel), data))
        else:
            write_file(join(self.staging, rel), data)
        self.files.inc()
        self.rows.inc(len(rows))
        yield "write", rel


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0]


def _files_under(root: str) -> list[str]:
    return [m.path for r in FileSystems.match([root + "/**"]) for m in r.metadata_list]


def _partition_listing(output: str, tables: Iterable[str]) -> tuple[set[str], dict[str, list[str]]]:
    """The partition folders of these tables under ``output``, and their files other than
    ``PART_NAME`` (an older writer's): one listing per table, not one per partition (on an
    object store each is a list request, and a backfill commits thousands). Only the folders
    and those few files are kept, not every file's path."""
    folders: set[str] = set()
    others: dict[str, list[str]] = {}
    for table in sorted(set(tables)):
        for path in _files_under(join(output, table)):
            folder, name = path.rsplit("/", 1)
            folders.add(folder)
            if name != PART_NAME:
                others.setdefault(folder, []).append(path)
    return folders, others


def _ensure_dir(path: str) -> None:
    """Local renames need the target folder; object stores have no folders (a no-op there)."""
    if "://" in path:
        return
    if not FileSystems.exists(path):
        try:
            FileSystems.mkdirs(path)
        except OSError:  # created concurrently, or not a local path
            pass


def _remove_empty_dirs(path: str, stop: str) -> None:
    """Drop now-empty local partition folders up to ``stop`` (object stores have none)."""
    if "://" in path:
        return
    while path.startswith(stop.rstrip("/") + "/") and os.path.isdir(path) and not os.listdir(path):
        os.rmdir(path)
        path = _parent(path)


def delete_tree(root: str) -> None:
    """Delete a folder and its files (object stores have no folders, only prefixes)."""
    if "://" not in root:
        # The lock's heartbeat rewrites the owner record in a job's staging meanwhile (a file
        # appearing or renamed away mid-delete); whatever it writes after is removed with the lock.
        shutil.rmtree(root, ignore_errors=True)
        return
    files = _files_under(root)
    if files:
        delete_files(files)


class _Fault:
    """Test-only fault injection: SIGKILL ourselves after N commit operations (or, with
    ``FLEETGRADE_FAULT_SIGNAL=INT``, SIGINT our process group, as Ctrl-C in a terminal does)."""

    def __init__(self) -> None:
        value = os.environ.get(FAULT_ENV, "")
        self.remaining = int(value) if value.isdigit() else -1
        self.interrupt = os.environ.get(FAULT_SIGNAL_ENV) == "INT"

    def tick(self) -> None:
        if self.remaining == 0:
            if self.interrupt:
                self.remaining = -1
                os.killpg(os.getpgrp(), signal.SIGINT)
                return
            os.kill(os.getpid(), 9)
        if self.remaining > 0:
            self.remaining -= 1


def _table_files(output: str, table: str) -> list[str]:
    globs = [join(output, g) for g in table_globs(table, "*")]
    return [m.path for r in FileSystems.match(globs) for m in r.metadata_list]


def _drop_staging(output: str, staging: str) -> None:
    """This job's staging only: another job's may be in use (it removes its own)."""
    delete_tree(staging)
    root = join(output, STAGING)
    if "://" not in root:
        try:
            os.rmdir(root)  # only once no job stages here
        except OSError:
            pass


def _state_of(rel: str) -> str | None:
    """The ``_state`` partition file of the partition ``rel`` is in (same workflow and date)."""
    parsed = parse_partition(rel)
    if parsed is None:
        return None
    return f"{STATE_TABLE}/workflow={parsed.workflow}/date={parsed.date}/{PART_NAME}"


def _marked(data: bytes) -> bytes:
    """A ``_state`` partition whose runs are all regraded next: no listing digest matches."""
    rows = [{**row, "listing_digest": None} for row in decode_table(STATE_TABLE, data)]
    return encode_table(STATE_TABLE, rows)


def mark_damaged(actions: list[Action], output: str, staging: str) -> list[Action]:
    """``actions`` with the ``_state`` partition of each damaged partition's workflow and date
    staged marked: its runs, whose rows the damaged file held, are regraded by the next job
    (``fleetgrade run`` starts it at once). A damaged ``_state`` partition is left out: the
    decision step found it, and regrades its runs in this job."""
    damaged = {_state_of(rel) for action, rel in actions if action == DAMAGED} - {None}
    if not damaged:
        return actions
    by_rel = {rel: action for action, rel in actions if action != DAMAGED}
    marked = []
    for rel in sorted(r for r in damaged if r is not None):
        action = by_rel.get(rel)
        source = join(staging, rel) if action == "write" else join(output, rel)
        try:
            data = read_stored(source) if action in ("write", "keep") else None
            if data is None:  # no state there: nothing of those runs is recorded as graded
                continue
            updated = _marked(data)
        except DamagedOutput:
            continue
        with FileSystems.create(join(staging, rel)) as fh:
            fh.write(updated)
        marked.append(rel)
    return [(a, r) for a, r in actions if r not in marked] + [("write", r) for r in marked]


def commit(_: Any, actions: list[Action], output: str, staging: str, tables: list[str],
           job: str | None = None, regrade_damaged: bool = True) -> list[str]:
    """Move staged partition files into place, delete emptied partitions, drop this job's staging.

    Idempotent, so a retried bundle is harmless. Files under ``_state/`` commit last: a run
    whose commit was cut short is redone by the next run. With ``job``, nothing moves unless
    that job may write the output (it holds the lock, or no live job does). With
    ``regrade_damaged``, the runs of a partition found damaged are marked for regrading.
    """
    if job is not None:
        check_holder(output, job)
    if regrade_damaged:
        actions = mark_damaged(actions, output, staging)
    fault = _Fault()
    ordered = []
    remote = scheme(output) == "gs"
    # On GCS one listing of the staging folder, not a request per staged file.
    staged = set(_files_under(staging)) if remote else None

    def is_staged(path: str) -> bool:
        return path in staged if staged is not None else FileSystems.exists(path)

    # Every staged file is checked before the first one moves: staging removed under a job
    # (its lock lost) fails the commit whole, not after some partitions.
    for action, rel in sorted(actions, key=lambda a: (a[1].startswith("_state"), a[1], a[0])):
        if action == DAMAGED:
            continue
        if action == "write" and not is_staged(join(staging, rel)):
            if FileSystems.exists(join(output, rel)):  # already committed by an earlier attempt
                continue
            raise FileNotFoundError(f"staged partition file missing: {join(staging, rel)}")
        ordered.append((action, rel))
    folders, others = _partition_listing(output, (rel.split("/", 1)[0] for action, rel in ordered if action == "write"))
    # Whole-table aggregates: a partition that got no rows this time is gone.
    produced = {join(output, rel) for _, rel in actions}
    unproduced = [path for table in sorted(t for t in set(tables) if SPECS[t].replace is Replace.TABLE)
                  for path in _table_files(output, table) if path not in produced]
    # Nothing moves or goes unless every place it touches is inside the output, links resolved.
    refuse_links(output, [join(output, rel) for _, rel in ordered] + [p for ps in others.values() for p in ps]
                 + unproduced)
    committed = _commit_concurrently(ordered, output, staging, others) if remote else []
    for action, rel in [] if remote else ordered:
        dst = join(output, rel)
        if action == "write":
            fault.tick()  # before each commit operation (a kept partition is none: cost_outliers keeps many)
            src = join(staging, rel)
            folder = _parent(dst)
            if folder not in folders:  # a new partition
                _ensure_dir(folder)
            if "://" not in dst and os.path.isdir(dst) and not os.path.islink(dst):
                shutil.rmtree(dst)  # a folder where the partition's file goes (found damaged, refused links)
            FileSystems.rename([src], [dst])
            # Any other file in the partition is from an older writer: the partition is now `dst`.
            stale = others.get(folder)
            if stale:
                FileSystems.delete(stale)
            committed.append(rel)
        elif action == "delete" and FileSystems.exists(dst):
            fault.tick()
            FileSystems.delete([dst])
            _remove_empty_dirs(_parent(dst), output)
            committed.append(rel)
    delete_files(unproduced)
    for path in unproduced:
        _remove_empty_dirs(_parent(path), output)
    _drop_staging(output, staging)
    LOG.info("committed %d partition file(s) under %s", len(committed), output)
    return committed


def _commit_concurrently(ordered: list[Action], output: str, staging: str,
                         others: dict[str, list[str]]) -> list[str]:
    """``commit``'s moves and deletes on an object store: the partitions concurrently (each
    one object replaced at once), every ``_state`` file after all of them."""
    committed: list[str] = []
    for last in (False, True):
        group = [(action, rel) for action, rel in ordered if rel.startswith("_state") == last]
        writes = [rel for action, rel in group if action == "write"]
        rename_files([(join(staging, rel), join(output, rel)) for rel in writes])
        # Any other file in a partition is from an older writer: the partition is now ours.
        delete_files([path for rel in writes for path in others.get(_parent(join(output, rel)), [])])
        deletes = [rel for action, rel in group if action == "delete"]
        found = list(pool().map(lambda rel: delete_file(join(output, rel)), deletes))
        committed += writes + [rel for rel, was in zip(deletes, found, strict=True) if was]
    return committed


class WriteTables(beam.PTransform):
    """:class:`TableWrites` → hive-partitioned Parquet under ``output``; outputs committed paths."""

    def __init__(self, output: str, token: str, regrade_damaged: bool = True) -> None:
        super().__init__()
        self.output = output.rstrip("/")
        self.token = token
        self.regrade_damaged = regrade_damaged
        self.staging = join(self.output, f"{STAGING}/{token}")

    def expand(self, writes: TableWrites) -> beam.PCollection:
        unknown = sorted(set(writes.tables) - set(SPECS))
        if unknown:
            raise ValueError(f"no TableSpec for tables {unknown} (schemas/tables.py)")
        names = sorted(writes.tables)
        # Stage each collection, then flatten the chunk references: the local runner materializes
        # every Flatten, so flattening rows first buffered every row of the fleet.
        keyed = [
            rows | f"Stage[{name}/{i}]" >> beam.ParDo(StageRows(name, self.staging))
            for name in names for i, rows in enumerate(_collections(writes.tables[name]))
        ]
        # References (bytes) and drops (identity tuples) meet in one Flatten and one GroupByKey:
        # each crossing of a stage holds them all in the local runner.
        keyed += [drops | f"KeyDrops/{i}" >> beam.Map(_key_drop) for i, drops in enumerate(_collections(writes.drops))]
        actions = (
            tuple(keyed)
            | "FlattenRefsAndDrops" >> beam.Flatten()
            | "GroupByPartition" >> beam.GroupByKey()
            | "WritePartition" >> beam.ParDo(_WritePartition(self.output, self.staging))
        )
        return (
            actions.pipeline
            | "CommitTrigger" >> beam.Impulse()  # one element: a Create adds three steps
            | "Commit" >> beam.FlatMap(
                commit, beam.pvalue.AsList(actions), output=self.output, staging=self.staging, tables=names,
                job=self.token, regrade_damaged=self.regrade_damaged)
        )


def _collections(rows: Rows) -> list[beam.PCollection]:
    return [rows] if isinstance(rows, beam.PCollection) else list(rows)
