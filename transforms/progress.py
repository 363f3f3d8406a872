"""One progress line for a whole local job: runs done / discovered, rate, ETA.

Local workers may be other processes (``direct-multiprocess``), and the local runner reports
Beam's metrics only once the job has ended, so workers write their counts to small files in a
folder the launching process names in ``FLEETGRADE_PROGRESS_DIR`` (worker processes inherit
its environment); the launcher sums them and prints. On Dataflow the variable is never set and
every :class:`Tally` does nothing.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final

ENV: Final = "FLEETGRADE_PROGRESS_DIR"
INTERVAL_ENV: Final = "FLEETGRADE_PROGRESS_INTERVAL"  # seconds between lines (default 10)
FLUSH_EVERY: Final = 0.5  # seconds between a worker's file writes
POLL_EVERY: Final = 0.25  # seconds between the launcher's reads
LOG = logging.getLogger("fleetgrade")

DISCOVERED, KEPT, FINISHED, DONE = "discovered", "kept", "finished", "done"
# Discovery's own counts (never adjusted later), and what reading the runs found.
RUN_FOLDERS, SESSION_FOLDERS = "run_folders", "session_folders"
DEAD_LETTERED, STRAY, LATE = "dead", "stray", "late"


class Tally:
    """A worker's counts, rewritten (atomically) to its own file at most every ``FLUSH_EVERY``."""

    def __init__(self, kind: str) -> None:
        folder = os.environ.get(ENV)
        self.path = os.path.join(folder, f"{kind}-{os.getpid()}-{uuid.uuid4().hex}.json") if folder else None
        self.counts: dict[str, int] = {}
        self._flushed = 0.0

    def add(self, name: str, n: int = 1) -> None:
        if self.path is None:
            return
        self.counts[name] = self.counts.get(name, 0) + n
        self.flush(force=False)

    def flush(self, force: bool = True) -> None:
        if self.path is None:
            return
        now = time.monotonic()
        if not force and now - self._flushed < FLUSH_EVERY:
            return
        self._flushed = now
        tmp = self.path + ".tmp"
        try:
            with open(tmp, "w") as fh:
                json.dump(self.counts, fh)
            os.replace(tmp, self.path)
        except OSError:  # progress is a courtesy: the folder is gone once the job has ended
            self.path = None


@dataclass(frozen=True)
class Snapshot:
    # Runs listed so far; a folder of session or trace files counts as one until it is read,
    # then as the sessions it holds (a file may hold several, or be a stray).
    discovered: int = 0
    kept: int = 0  # of them, not regraded (unchanged, outside --since/--until)
    done: int = 0  # runs read and graded or dead-lettered
    finished: bool = False  # discovery has listed the whole input
    run_folders: int = 0  # what discovery listed: gh-aw run folders
    session_folders: int = 0  # and folders of session or trace files
    dead: int = 0  # of the runs done, dead letters
    stray: int = 0  # files of session folders that are no session (skipped)
    late: int = 0  # of the runs done, dated outside --since/--until once read

    @property
    def to_grade(self) -> int:
        return self.discovered - self.kept


def read_snapshot(folder: str) -> Snapshot:
    totals: dict[str, int] = {}
    try:
        names = [n for n in os.listdir(folder) if n.endswith(".json")]
    except OSError:
        return Snapshot()
    for name in names:
        try:
            with open(os.path.join(folder, name)) as fh:
                counts = json.load(fh)
        except (OSError, ValueError):  # replaced while read: the next poll sees it
            continue
        for key, value in counts.items():
            if isinstance(value, int):
                totals[key] = totals.get(key, 0) + value
    return Snapshot(totals.get(DISCOVERED, 0), totals.get(KEPT, 0), totals.get(DONE, 0), totals.get(FINISHED, 0) > 0,
                    *(totals.get(k, 0) for k in (RUN_FOLDERS, SESSION_FOLDERS, DEAD_LETTERED, STRAY, LATE)))


def format_duration(seconds: float) -> str:
    """``45s``, ``3m05s``, ``2h07m``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def eta_seconds(remaining: int, rate: float) -> float | None:
    """Seconds left at ``rate`` runs/s, None while there is no rate to go by."""
    if remaining <= 0:
        return 0.0
    return remaining / rate if rate > 0 else None


def discovery_line(snap: Snapshot) -> str:
    """What discovery listed, in its own terms: a folder of session files is counted as a folder,
    since how many runs it holds is known only once its files are read."""
    folders = f" and {snap.session_folders} folder(s) of session or trace files" if snap.session_folders else ""
    kept = f" ({snap.kept} unchanged or outside --since/--until)" if snap.kept else ""
    to_read = snap.run_folders + snap.session_folders - snap.kept
    return f"discovered {snap.run_folders} run folder(s){folders}: {to_read} to read{kept}"


def read_line(snap: Snapshot, read_as: str = "graded") -> str:
    """Once every run to read is read: the counts the job's summary gives (``read_as``: what a
    run read and not dead-lettered is, ``graded`` in ``run``)."""
    if not snap.to_grade:
        return "no run to grade"
    late = f", {snap.late} outside --since/--until" if snap.late else ""
    stray = f"; {snap.stray} stray file(s) skipped" if snap.stray else ""
    return (f"all {snap.done} run(s) read: {snap.done - snap.dead - snap.late} {read_as}, {snap.dead} dead-lettered"
            f"{late}{stray}")


def progress_line(snap: Snapshot, grading_seconds: float) -> str:
    """``progress: 1200/5000 runs done (24.0%), 41.2 runs/s, ETA 1m32s`` for the whole job."""
    done = snap.kept + snap.done
    rate = snap.done / grading_seconds if grading_seconds > 0 else 0.0
    if not snap.finished:
        return f"progress: {done} runs done, {snap.discovered}+ discovered so far, {rate:.1f} runs/s"
    pct = 100.0 * done / snap.discovered if snap.discovered else 100.0
    eta = eta_seconds(snap.to_grade - snap.done, rate)
    return (f"progress: {done}/{snap.discovered} runs done ({pct:.1f}%), {rate:.1f} runs/s, "
            f"ETA {'?' if eta is None else format_duration(eta)}")


class _Reporter(threading.Thread):
    """Reads the workers' counts and logs: the discovery count once, a progress line every
    ``interval``, and, once every run is graded, that the tables are being written."""

    def __init__(self, folder: str, interval: float, read_as: str = "graded") -> None:
        super().__init__(name="fleetgrade-progress", daemon=True)
        self.folder, self.interval, self.read_as = folder, interval, read_as
        self.stopped = threading.Event()
        self.started = time.monotonic()
        self.grading_since: float | None = None
        self.said_discovery = False
        self.writing_since: float | None = None
        self.last_line = self.started

    def step(self, final: bool = False) -> None:
        snap = read_snapshot(self.folder)
        now = time.monotonic()
        if snap.finished and not self.said_discovery:
            self.said_discovery = True
            self.grading_since = self.last_line = now
            LOG.info("%s", discovery_line(snap))
        if final:
            return
        if snap.finished and snap.done >= snap.to_grade:
            if self.writing_since is None:
                self.writing_since = self.last_line = now
                LOG.info("%s; writing the tables", read_line(snap, self.read_as))
            elif now - self.last_line >= self.interval:
                self.last_line = now
                LOG.info("writing the tables (%s so far)", format_duration(now - self.writing_since))
            return
        if now - self.last_line >= self.interval and (snap.discovered or snap.done):
            self.last_line = now
            LOG.info("%s", progress_line(snap, now - (self.grading_since or self.started)))

    def run(self) -> None:
        while not self.stopped.wait(POLL_EVERY):
            self.step()


@contextmanager
def reporting(enabled: bool = True, read_as: str = "graded") -> Iterator[None]:
    """Progress lines while a local job runs in this block (nothing when not ``enabled``);
    ``read_as`` names a run read and not dead-lettered in the last line."""
    if not enabled:
        yield
        return
    folder = tempfile.mkdtemp(prefix="fleetgrade-progress-")
    previous = os.environ.get(ENV)
    os.environ[ENV] = folder
    reporter = _Reporter(folder, float(os.environ.get(INTERVAL_ENV) or 10), read_as)
    reporter.start()
    try:
        yield
    finally:
        reporter.stopped.set()
        reporter.join()
        reporter.step(final=True)  # a job shorter than a poll still says what it discovered
        if previous is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = previous
        shutil.rmtree(folder, ignore_errors=True)
