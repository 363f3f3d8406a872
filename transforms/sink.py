"""Hive-partitioned Parquet sink with atomic per-partition commit (design.md §2, "Write").

Rows are packed into chunks per (table, workflow, date) and staged to shard files as they are
produced (``transforms/staging.py``); only chunk references are grouped per partition. Each
touched partition is rewritten as ONE file: the rows already in it that survive (see
``schemas.tables.IDENTITY``: an old row goes when a new row or a dropped run has its identity)
plus the new rows, sorted. The file is written to
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

(Beam's ``fileio.WriteToFiles`` left temporary files behind with such destinations; see
environment-notes.md.)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from graders.tables.parquet import decode_table, encode_table, partition_path
from schemas.tables import IDENTITY, REPLACE_TABLE
from transforms.beamfiles import join
from transforms.heap import tune_heap
from transforms.output_lock import STAGING, check_holder
from transforms.staging import PartitionKey, StageRows, read_chunks

PART_NAME = "part-00000.parquet"
LOG = logging.getLogger("fleetgrade")
# Crash-safety tests kill the process after N commit operations (never set in production).
FAULT_ENV = "FLEETGRADE_FAULT_KILL_AFTER_COMMITS"

Drop = tuple[str, str | None, str | None, tuple[Any, ...]]  # (table, workflow, date, identity)
TableRows = beam.PCollection | dict[str, beam.PCollection]  # a table's rows, or its named parts
Action = tuple[str, str]  # ("write" | "keep" | "delete", partition file path relative to output)


def identity_of(table: str, row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row.get(c) for c in IDENTITY[table])


def _key_drop(drop: Drop) -> tuple[PartitionKey, tuple[Any, ...]]:
    table, workflow, date, ident = drop
    return (table, workflow, date), ident


def partition_file(table: str, workflow: str | None, date: str | None) -> str:
    """A partition's one file, relative to the output folder."""
    return f"{partition_path(table, workflow, date)}/{PART_NAME}"


def read_if_exists(path: str) -> bytes | None:
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path) as fh:
        data: bytes = fh.read()
    return data


Assemble = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


class _WritePartition(beam.DoFn):
    def __init__(self, output: str, staging: str, assemble: Mapping[str, Assemble]) -> None:
        self.output = output
        self.staging = staging
        self.assemble = dict(assemble)
        self.files = Metrics.counter("fleetgrade", "partitions_written")
        self.unchanged = Metrics.counter("fleetgrade", "partitions_unchanged")
        self.rows = Metrics.counter("fleetgrade", "rows_written")

    def setup(self) -> None:
        tune_heap()  # a worker that only writes decodes and encodes partitions with Arrow too

    def process(self, kv: tuple[PartitionKey, Iterable[Any]]) -> Iterator[Action]:
        (table, workflow, date), values = kv
        refs: list[bytes] = []
        drops: set[tuple[Any, ...]] = set()
        for value in values:  # a chunk reference (bytes), or the identity of a row to drop
            if isinstance(value, bytes):
                refs.append(value)
            else:
                drops.add(tuple(value))
        new_rows = list(read_chunks(self.staging, table, refs))
        if table in self.assemble:
            new_rows = self.assemble[table](new_rows)
        rel = partition_file(table, workflow, date)
        existing = read_if_exists(join(self.output, rel))
        rows = new_rows
        if table in IDENTITY and existing is not None:
            replaced = drops | {identity_of(table, r) for r in new_rows}
            kept = [r for r in decode_table(table, existing) if identity_of(table, r) not in replaced]
            rows = kept + new_rows
        if not rows:
            if existing is not None:
                yield "delete", rel
            return
        data = encode_table(table, rows, workflow)
        if data == existing:
            self.unchanged.inc()
            yield "keep", rel
            return
        with FileSystems.create(join(self.staging, rel)) as fh:
            fh.write(data)
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
    files = _files_under(root)
    if files:
        FileSystems.delete(files)
    if FileSystems.exists(root):  # local folders remain once their files are gone
        FileSystems.delete([root])


class _Fault:
    """Test-only fault injection: SIGKILL ourselves after N commit operations."""

    def __init__(self) -> None:
        value = os.environ.get(FAULT_ENV, "")
        self.remaining = int(value) if value.isdigit() else -1

    def tick(self) -> None:
        if self.remaining == 0:
            os.kill(os.getpid(), 9)
        if self.remaining > 0:
            self.remaining -= 1


def table_globs(output: str, table: str, name: str = PART_NAME) -> list[str]:
    """Globs of a table's files: ``name`` in each partition, and ``<table>/part-00000.parquet``,
    a table's one file from before it was partitioned (``_state`` of earlier builds), which is
    read like a partition and replaced by the partitions written."""
    return [join(output, f"{table}/*/*/{name}"), join(output, f"{table}/{PART_NAME}")]


def _table_files(output: str, table: str) -> list[str]:
    return [m.path for r in FileSystems.match(table_globs(output, table, "*")) for m in r.metadata_list]


def _drop_staging(output: str, staging: str) -> None:
    """This job's staging only: another job's may be in use (it removes its own)."""
    delete_tree(staging)
    root = join(output, STAGING)
    if "://" not in root:
        try:
            os.rmdir(root)  # only once no job stages here
        except OSError:
            pass


def commit(_: Any, actions: list[Action], output: str, staging: str, tables: list[str],
           job: str | None = None) -> list[str]:
    """Move staged partition files into place, delete emptied partitions, drop this job's staging.

    Idempotent, so a retried bundle is harmless. Files under ``_state/`` commit last: a run
    whose commit was cut short is redone by the next run. With ``job``, nothing moves unless
    that job may write the output (it holds the lock, or no live job does).
    """
    if job is not None:
        check_holder(output, job)
    fault = _Fault()
    ordered = []
    # Every staged file is checked before the first one moves: staging removed under a job
    # (its lock lost) fails the commit whole, not after some partitions.
    for action, rel in sorted(actions, key=lambda a: (a[1].startswith("_state"), a[1], a[0])):
        if action == "write" and not FileSystems.exists(join(staging, rel)):
            if FileSystems.exists(join(output, rel)):  # already committed by an earlier attempt
                continue
            raise FileNotFoundError(f"staged partition file missing: {join(staging, rel)}")
        ordered.append((action, rel))
    folders, others = _partition_listing(output, (rel.split("/", 1)[0] for action, rel in ordered if action == "write"))
    committed = []
    for action, rel in ordered:
        dst = join(output, rel)
        if action == "write":
            src = join(staging, rel)
            folder = _parent(dst)
            if folder not in folders:  # a new partition
                _ensure_dir(folder)
            FileSystems.rename([src], [dst])
            # Any other file in the partition is from an older writer: the partition is now `dst`.
            stale = others.get(folder)
            if stale:
                FileSystems.delete(stale)
            committed.append(rel)
        elif action == "delete" and FileSystems.exists(dst):
            FileSystems.delete([dst])
            _remove_empty_dirs(_parent(dst), output)
            committed.append(rel)
        fault.tick()
    # Whole-table aggregates: a partition that got no rows this time is gone.
    produced = {join(output, rel) for _, rel in actions}
    for table in sorted(REPLACE_TABLE & set(tables)):
        for path in _table_files(output, table):
            if path not in produced:
                FileSystems.delete([path])
                _remove_empty_dirs(_parent(path), output)
    _drop_staging(output, staging)
    LOG.info("committed %d partition file(s) under %s", len(committed), output)
    return committed


class WritePartitionedParquet(beam.PTransform):
    """{table: rows} (+ drops) → hive-partitioned Parquet under ``output``; outputs committed paths."""

    def __init__(self, output: str, token: str, assemble: Mapping[str, Assemble] | None = None) -> None:
        """``assemble`` maps a table to the function making its rows from the rows staged for
        one partition (a table staged as parts of rows, such as ``runs``)."""
        super().__init__()
        self.output = output.rstrip("/")
        self.token = token
        self.staging = join(self.output, f"{STAGING}/{token}")
        self.assemble = dict(assemble or {})

    def expand(self, tables: dict[str, TableRows]) -> beam.PCollection:
        """``tables`` maps table names to row collections, or to named parts whose rows make
        the table together; the key ``"_drops"`` (optional) holds (table, workflow, date, identity)
        tuples of rows to remove."""
        names = sorted(t for t in tables if t != "_drops")
        # Stage each collection, then flatten the chunk references: the local runner materializes
        # every Flatten, so flattening rows first buffered every row of the fleet.
        staged = []
        for name in names:
            rows = tables[name]
            parts = {name: rows} if isinstance(rows, beam.PCollection) else {f"{name}/{k}": v for k, v in rows.items()}
            for label, part in parts.items():
                staged.append(part | f"Stage[{label}]" >> beam.ParDo(StageRows(name, self.staging)))
        # References (bytes) and drops (identity tuples) meet in one Flatten and one GroupByKey:
        # each crossing of a stage holds them all in the local runner.
        keyed = list(staged)
        if "_drops" in tables:
            keyed.append(tables["_drops"] | "KeyDrops" >> beam.Map(_key_drop))
        actions = (
            tuple(keyed)
            | "FlattenRefsAndDrops" >> beam.Flatten()
            | "GroupByPartition" >> beam.GroupByKey()
            | "WritePartition" >> beam.ParDo(_WritePartition(self.output, self.staging, self.assemble))
        )
        return (
            actions.pipeline
            | "CommitTrigger" >> beam.Create([None])
            | "Commit" >> beam.FlatMap(
                commit, beam.pvalue.AsList(actions), output=self.output, staging=self.staging, tables=names,
                job=self.token)
        )
