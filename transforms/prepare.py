"""Read + preprocess: one DoFn per run, bad runs to the dead letter (docs/architecture.md)."""

from __future__ import annotations

import logging
import pickle
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics

from graders.prepare import PreparedRun, prepare_run
from graders.prepare_sessions import NotASession, SessionFailure, prepare_sessions
from graders.runs.layout import layout_hints
from graders.runs.runfiles import RunFiles
from graders.runs.storage import PREFETCH_RUNS, RunReader, hint_path, list_run, run_files
from graders.tables.rows import dead_letter_row
from graders.tables.state import listing_digest, listing_fingerprint
from transforms.ahead import Ahead, windowed
from transforms.beamfiles import join, reader_for, store_for
from transforms.discover import RunListing
from transforms.discover import holds_sessions as holds_session_files
from transforms.heap import tune_gc, tune_heap
from transforms.progress import DEAD_LETTERED, DISCOVERED, DONE, STRAY, Tally

DEAD = "dead_letter"
DEAD_STATE = "dead_state"  # (dead-letter row, listing digest, previous state) for the state table
LOG = logging.getLogger("fleetgrade")

# (root, listing) from discovery, or (root, listing fingerprint, previous state row) from the
# incremental decision (transforms.incremental.RunToGrade).
RunToRead = RunListing | tuple[str, bytes, Any]


class PreparedRunCoder(beam.coders.Coder):
    """Pickle, with a size estimate that does not encode the run.

    Prepared runs stay inside one fused stage, but Beam samples element sizes for its
    metrics by encoding them; with the default coder that pickled ~2/3 of all traces
    (large ones included) for nothing (make bench profile). The estimate is the bytes read.
    """

    def encode(self, value: PreparedRun) -> bytes:
        return pickle.dumps(value, pickle.HIGHEST_PROTOCOL)

    def decode(self, encoded: bytes) -> PreparedRun:
        prep: PreparedRun = pickle.loads(encoded)
        return prep

    def is_deterministic(self) -> bool:
        return False

    def estimate_size(self, value: Any, nested: bool = False) -> int:
        report = getattr(value, "report", None)
        return max(64, int(getattr(report, "bytes_read", 0) or 0))

    def to_type_hint(self) -> Any:
        return PreparedRun


beam.coders.registry.register_coder(PreparedRun, PreparedRunCoder)


def holds_sessions(files: RunFiles) -> bool:
    """A folder of agent session / trace files of other formats, not a gh-aw run."""
    return holds_session_files(list(files.sizes))


class PrepareRun(beam.DoFn):
    """A run to read → PreparedRun, or a dead-letter row naming the run and the problem."""

    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")
        self.prepared = Metrics.counter("fleetgrade", "runs_prepared")
        self.dead = Metrics.counter("fleetgrade", "runs_dead_lettered")
        self.bytes = Metrics.counter("fleetgrade", "bytes_read")
        self.changed = Metrics.counter("fleetgrade", "runs_changed_since_discovery")
        # A folder of session files was discovered as one; each of its sessions is an input.
        self.discovered = Metrics.counter("fleetgrade", "runs_discovered")
        self.stray = Metrics.counter("fleetgrade", "stray_files_skipped")

    def setup(self) -> None:
        tune_heap()  # a worker: its heap must not grow with the runs it has read
        tune_gc()  # nor its start-up objects, or a run's while it is graded, be walked by collections
        self._tally = Tally("prepare")  # the job's progress line (transforms/progress.py)
        # On an object store, the next runs of the bundle are listed and fetched while one is
        # read (graders/runs/storage.py RunReader): they wait here, at most PREFETCH_RUNS of them.
        self._reader: RunReader | None = reader_for(self.base)
        self._ahead: Ahead[RunToRead] = Ahead(PREFETCH_RUNS, self._submit)

    def _submit(self, element: RunToRead) -> None:
        if self._reader is not None:
            self._reader.submit(self.base, element[0])  # listed and fetched from now on

    def finish_bundle(self) -> Iterable[Any] | None:
        out = [windowed(value, ts, window) for element, _, ts, window in self._ahead.drain()
               for value in self.prepare(element)]
        self._tally.flush()
        return out or None

    def process(self, element: RunToRead, timestamp: Any = beam.DoFn.TimestampParam,
                window: Any = beam.DoFn.WindowParam) -> Iterator[Any]:
        if self._reader is None or not isinstance(element[1], bytes):
            yield from self.prepare(element)
            return
        for ready, _ in self._ahead.push(element, timestamp, window):
            yield from self.prepare(ready)

    def prepare(self, element: RunToRead) -> Iterator[Any]:
        """One run: its PreparedRun(s), or its dead letter."""
        root = join(self.base, element[0])
        try:
            yield from self._prepare(element)
        finally:
            if self._reader is not None:
                self._reader.release(root)  # what it did not read gives its bytes back

    def _list(self, root_rel: str) -> list[Any]:
        """The run listed again now: by the reader (with each object's generation) on an object store."""
        if self._reader is not None:
            return self._reader.listing(self.base, root_rel)
        return list_run(self.base, root_rel, store_for(self.base))

    def _prepare(self, element: RunToRead) -> Iterator[Any]:
        self._tally.add(DONE)
        # From the incremental decision, the run is listed again here and graded as it is now.
        root_rel = element[0]
        root = join(self.base, root_rel)
        listing: list[Any] = []
        digest = listing_digest(listing)
        previous = element[2] if isinstance(element[1], bytes) else None
        # Everything about one run happens inside this boundary: listing it again, reading,
        # identity, preprocessing. Whatever it raises (a RecursionError, a MemoryError, an
        # OSError…), the run is a dead letter and the job goes on.
        try:
            if isinstance(element[1], bytes):
                listing = self._list(root_rel)
                digest = listing_digest(entry[:3] for entry in listing)
                if listing_fingerprint(digest) != element[1]:
                    # Still being written, or rewritten, since discovery: its state records the
                    # listing read here, so the next run sees it unchanged only if it is.
                    self.changed.inc()
                    LOG.info("run folder %s changed since it was discovered; graded as it is now", root)
            else:
                listing = element[1]
                digest = listing_digest(listing)
            if not listing:
                raise FileNotFoundError(f"{root}: the run folder has no files any more "
                                        "(it had when discovered)")
            files = run_files(root, listing, self._reader)
            if holds_sessions(files):  # a folder of session files: a run per session (graders/formats)
                # Read and graded one file at a time (each file's failure is its own): never all held.
                sessions = prepare_sessions(files, hint_path(self.base, root_rel))
            else:
                try:
                    prep: PreparedRun = prepare_run(files, hint_path(self.base, root_rel))
                finally:
                    self.bytes.inc(files.bytes_read)
        except Exception as exc:  # every ungradable run becomes a row, never a failed job
            self.dead.inc()
            self._tally.add(DEAD_LETTERED)
            LOG.warning("dead letter: %s", exc)
            # Partition the dead letter by what the path says, when it says anything.
            workflow, run_id, date = layout_hints(hint_path(self.base, root_rel))
            row = dead_letter_row(root, "prepare", exc, run_id=run_id, workflow=workflow, date=date)
            yield beam.pvalue.TaggedOutput(DEAD, row)
            yield beam.pvalue.TaggedOutput(DEAD_STATE, (row, digest, previous))
            return
        if holds_sessions(files):
            try:
                yield from self._sessions(sessions, digest, previous)
            finally:
                self.bytes.inc(files.bytes_read)
            return
        self.prepared.inc()
        prep.previous = previous
        prep.listing_digest = digest
        yield prep

    def _sessions(self, sessions: Iterator[PreparedRun | SessionFailure | NotASession], digest: str,
                  previous: Any) -> Iterator[Any]:
        """Each session a prepared run; each file no reader could read a dead letter naming it."""
        # The folder was counted as one run, discovered and done (the progress line too): it
        # counts as its sessions, so one less than the sessions and failures it holds.
        self.discovered.inc(-1)
        self._tally.add(DISCOVERED, -1)
        self._tally.add(DONE, -1)
        for item in sessions:
            if isinstance(item, NotASession):
                self.stray.inc()
                self._tally.add(STRAY)
                LOG.info("not an agent session or trace, skipped: %s", item.path)
                continue
            self.discovered.inc()
            self._tally.add(DISCOVERED)
            self._tally.add(DONE)
            if isinstance(item, SessionFailure):
                self.dead.inc()
                self._tally.add(DEAD_LETTERED)
                LOG.warning("dead letter: %s", item.error)
                row = dead_letter_row(item.path, "prepare", item.error, workflow=item.workflow, date=item.date)
                yield beam.pvalue.TaggedOutput(DEAD, row)
                yield beam.pvalue.TaggedOutput(DEAD_STATE, (row, digest, None))
                continue
            self.prepared.inc()
            item.previous = previous
            item.listing_digest = digest
            yield item

