"""One fleet, one folder per run identity (issue 31, "Fleet identity").

Two folders with the same (workflow, run id, attempt), e.g. one run downloaded twice, would
both be graded into the same rows: the ``runs`` row would count both folders' graders and
``task_reliability`` a rerun that never happened. Before any run is prepared, each run to grade
is keyed by its identity (its ``aw_info.json``, else its path, as ``determine_run_meta`` reads
them); a folder alone with its identity goes on unchanged. Folders sharing one are compared
byte for byte: identical copies are graded once, from the first folder by path, and every other
copy becomes a ``duplicate`` dead letter naming the folder graded; copies that differ are all
dead letters naming each other, since no one of them is the run. A dead letter per extra copy
keeps the job's count whole: runs discovered = graded + dead-lettered (+ unchanged).

On an incremental job the folders graded by earlier jobs and unchanged since take part too,
by their stored state: a new folder holding the identity of such a run is a dead letter (its
copy, or a conflicting one), and the run's earlier grades stay; ``--full`` compares them all
anew.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import Any, Final

import apache_beam as beam
import msgspec
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from graders.jsrt.jsonio import MAX_FILE_SIZE
from graders.runs.runfiles import memory_run_files
from graders.runs.runmeta import AW_INFO_PATHS, determine_run_meta
from graders.tables.rows import dead_letter_row
from graders.tables.state import listing_digest
from transforms.ahead import Ahead, windowed
from transforms.beamfiles import join, pool, read_if_exists, store_for
from transforms.discover import hint_path, holds_sessions, list_run
from transforms.incremental import RunToGrade
from transforms.prepare import DEAD, DEAD_STATE
from transforms.progress import DEAD_LETTERED, DONE, Tally

STAGE: Final = "duplicate"  # the dead_letter stage of a folder not graded for its identity
Identity = tuple[str, str, int]  # (workflow, run id, attempt)


def _read_small(path: str) -> bytes | None:
    """A file's bytes, or None when it is absent, unreadable or over the size limit (then the
    run is prepared alone, and preparing it reports the problem)."""
    try:
        data = read_if_exists(path, MAX_FILE_SIZE + 1, of_a_run=True)  # one request on an object store
    except Exception:  # unreadable
        return None
    if data is None:  # absent (the common case for layout-only runs)
        return None
    return data if len(data) <= MAX_FILE_SIZE else None


def run_identity(base: str, root_rel: str) -> tuple[Identity, str] | None:
    """((workflow, run id, attempt), date) as preparing the run will determine them, or None
    when they cannot be (the run is then dead-lettered by preparation, with the reason)."""
    root = join(base, root_rel)
    for rel in AW_INFO_PATHS:
        data = _read_small(join(root, rel))
        if data is not None:
            files = memory_run_files({rel: data}, root)
            break
    else:
        try:
            listed = [rel for rel, _, _ in list_run(base, root_rel)]
        except OSError:  # a folder that cannot be listed: preparing it says why (its dead letter)
            return None
        if holds_sessions(listed):
            return None  # a folder of session files: each session's identity is in its file
        files = memory_run_files({}, root)
    try:
        meta = determine_run_meta(files, hint_path(base, root_rel))
    except Exception:  # unidentifiable: graded (or dead-lettered) alone
        return None
    return (meta.workflow, meta.run_id, meta.attempt), meta.date


def content_digest(base: str, root_rel: str) -> str:
    """SHA-256 of a run folder's file names, sizes and bytes: equal for byte-identical copies
    wherever they are (modification times are not compared)."""
    root = join(base, root_rel)
    h = hashlib.sha256()
    for rel, size, _ in list_run(base, root_rel):
        file_hash = hashlib.sha256()
        with FileSystems.open(join(root, rel), compression_type=CompressionTypes.UNCOMPRESSED) as fh:
            while block := fh.read(1 << 20):
                file_hash.update(block)
        h.update(f"{rel}\0{size}\0{file_hash.hexdigest()}\n".encode())
    return h.hexdigest()


# A run to grade under its identity: ("run", date, RunToGrade, folders earlier jobs graded with
# the same identity and kept unchanged).
# A folder to grade as its identity's shuffle carries it: ("run", date, the run, the roots graded
# earlier under that identity), packed to bytes: the local runner holds a shuffle decoded, one
# element per run to grade, and bytes take ~120 bytes there where the tuple took ~450.
Member = tuple[str, str | None, RunToGrade, list[str]]
_MEMBER_ENCODER: Final = msgspec.msgpack.Encoder()
_MEMBER_DECODER: Final = msgspec.msgpack.Decoder(Member)


# Runs whose identity is read ahead on an object store, while an earlier one is keyed.
IDENTITIES_AHEAD: Final = 16


class _KeyByIdentity(beam.DoFn):
    def __init__(self, base: str) -> None:
        self.base = base

    def setup(self) -> None:
        remote = store_for(self.base) is not None
        self._ahead: Ahead[RunToGrade] = Ahead(IDENTITIES_AHEAD if remote else 0, self._start)

    def _start(self, run: RunToGrade) -> Any:
        return pool().submit(run_identity, self.base, run[0]) if self._ahead.depth else None

    def process(self, run: RunToGrade, kept: Any, timestamp: Any = beam.DoFn.TimestampParam,
                window: Any = beam.DoFn.WindowParam) -> Iterator[tuple[Any, bytes]]:
        """``kept``: identity → roots, Beam's multimap side input (looked up one key at a time)."""
        self._kept = kept
        for ready, work in self._ahead.push(run, timestamp, window):
            yield from self._key(ready, work, kept)

    def finish_bundle(self) -> Any:
        return [windowed(out, ts, window) for run, work, ts, window in self._ahead.drain()
                for out in self._key(run, work, self._kept)] or None

    def _key(self, run: RunToGrade, work: Any, kept: Any) -> Iterator[tuple[Any, bytes]]:
        found = work.result() if work is not None else run_identity(self.base, run[0])
        if found is None:  # a key of its own: it meets no other folder
            yield ("", run[0], 0), _MEMBER_ENCODER.encode(("run", None, run, []))
        else:
            yield found[0], _MEMBER_ENCODER.encode(("run", found[1], run, list(kept[found[0]])))


def _kept_identity(state: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    if state.get("outcome") == "graded":
        yield (state.get("workflow"), state.get("run_id"), state.get("attempt")), state.get("root")


class _Resolve(beam.DoFn):
    """An identity's folders → the one to grade, and a dead letter for each other."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.duplicates = Metrics.counter("fleetgrade", "runs_duplicate")
        self.dead = Metrics.counter("fleetgrade", "runs_dead_lettered")

    def setup(self) -> None:
        self._tally = Tally("duplicates")

    def finish_bundle(self) -> None:
        self._tally.flush()

    def process(self, kv: tuple[Any, Iterable[bytes]]) -> Iterator[Any]:
        key, members = kv
        runs = sorted((_MEMBER_DECODER.decode(m) for m in members), key=lambda m: m[2][0])
        kept = sorted({root for m in runs for root in m[3]})
        if kept:  # a folder graded earlier and gone since (moved, deleted) holds nothing any more
            kept = [root for root in kept if list_run(root, "")]
        if len(runs) == 1 and not kept:
            yield runs[0][2]
            return
        workflow, run_id, attempt = key
        what = f"workflow {workflow!r}, run {run_id!r}, attempt {attempt}"
        # A folder graded earlier stays first: its grades are in the tables and are kept.
        folders = [(root, None) for root in kept] + [(join(self.base, m[2][0]), m[2]) for m in runs]
        digests = {content_digest(self.base, m[2][0]) for m in runs}
        digests |= {content_digest(root, "") for root in kept}
        roots = [root for root, _ in folders]
        if len(digests) == 1:
            first = folders[0][0]
            if folders[0][1] is not None:
                yield folders[0][1]
            dead = [m for m in runs if join(self.base, m[2][0]) != first]
            message = f"same run ({what}) as {first}, with byte-identical files: graded once, from {first}"
            error_class = "DuplicateRun"
        else:
            dead = runs
            message = f"{len(folders)} folders hold the run ({what}) with different files: {', '.join(roots)}; "
            message += (f"{', '.join(kept)} keep their grades from an earlier job (--full compares them anew)"
                        if kept else "none is graded until one remains")
            error_class = "ConflictingRuns"
        for _, date, (root_rel, _, previous), _ in dead:
            self.dead.inc()
            self.duplicates.inc()
            self._tally.add(DONE)
            self._tally.add(DEAD_LETTERED)
            root = join(self.base, root_rel)
            row = dead_letter_row(root, STAGE, f"{root}: {message}", run_id=run_id, workflow=workflow,
                                  date=date, error_class=error_class)
            yield beam.pvalue.TaggedOutput(DEAD, row)
            yield beam.pvalue.TaggedOutput(DEAD_STATE, (row, listing_digest(list_run(self.base, root_rel)), previous))


class ResolveDuplicates(beam.PTransform):
    """(runs to grade, stored states kept unchanged) → (runs to grade, one folder per identity;
    dead letters; their state items, as ``PrepareRun`` tags them)."""

    def __init__(self, base: str) -> None:
        super().__init__()
        self.base = base.rstrip("/")

    def expand(self, inputs: tuple[beam.PCollection, beam.PCollection]) -> Any:
        runs, kept = inputs
        # The kept folders' identities reach each run to grade as a side input: complete once
        # discovery has listed the input, which is before any run to grade leaves its shuffle;
        # only the runs to grade are grouped (an unchanged rerun groups nothing).
        kept_roots = kept | "KeptIdentities" >> beam.FlatMap(_kept_identity)
        return (
            runs
            | "KeyByIdentity" >> beam.ParDo(_KeyByIdentity(self.base), beam.pvalue.AsMultiMap(kept_roots))
            | "GroupByIdentity" >> beam.GroupByKey()
            | "Resolve" >> beam.ParDo(_Resolve(self.base)).with_outputs(DEAD, DEAD_STATE, main="runs")
        )
