"""Discover run folders under ``--input`` (docs/architecture.md): the Beam step over the listing
core (graders/runs/storage.py), which lists and groups a fleet wherever it is stored."""

from __future__ import annotations

from collections.abc import Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics

from graders.formats.ghaw.reader import is_run_folder
from graders.runs import storage
from graders.runs.layout import SESSION_SUFFIXES
from graders.runs.storage import FleetRuns, RunListing, hint_path
from transforms.beamfiles import store_for
from transforms.progress import DISCOVERED, FINISHED, RUN_FOLDERS, SESSION_FOLDERS, STRAY, Tally

__all__ = ["DiscoverRuns", "ListRuns", "RunListing", "hint_path", "holds_sessions", "list_run"]


def _entries(base: str) -> Iterator[tuple[str, int, float]]:
    """(path relative to ``base``, size, mtime seconds) of every file below ``base``, as listed."""
    return storage.entries(base, store_for(base))


def list_run(base: str, root_rel: str) -> list[tuple[str, int, float]]:
    """The sorted listing of one run folder, as ``ListRuns`` lists it within the fleet."""
    return storage.list_run(base, root_rel, store_for(base))


def holds_sessions(names: list[str]) -> bool:
    """A folder (its files' relative paths) of agent session / trace files of other formats, not a gh-aw run."""
    return not is_run_folder(names) and any(name.endswith(SESSION_SUFFIXES) for name in names)


class ListRuns(beam.DoFn):
    """The fleet root → one (run root, sorted listing) per run folder, as the listing streams by
    (``FleetRuns``: only the runs being listed are held)."""

    def __init__(self) -> None:
        self.files = Metrics.counter("fleetgrade", "files_discovered")
        self.stray = Metrics.counter("fleetgrade", "stray_files_skipped")

    def process(self, base: str) -> Iterator[RunListing]:
        tally = Tally("discover")  # the job's progress line (transforms/progress.py)
        yield from self.discover(base, tally)
        tally.add(FINISHED)
        tally.flush()

    def discover(self, base: str, tally: Tally) -> Iterator[RunListing]:
        """The runs; the progress line is told how many run folders and folders of session files
        were listed, and the files outside any run (strays)."""
        grouping = FleetRuns(base)
        try:
            for run in grouping.runs(_entries(base)):
                tally.add(DISCOVERED)
                tally.add(SESSION_FOLDERS if holds_sessions([e[0] for e in run[1]]) else RUN_FOLDERS)
                yield run
        finally:
            self.files.inc(grouping.files)
            self.stray.inc(grouping.stray)
        tally.add(STRAY, grouping.stray)


class DiscoverRuns(beam.PTransform):
    """``<input>/**`` → one (run root, sorted file listing) per run folder."""

    def __init__(self, base: str) -> None:
        super().__init__()
        self.base = base.rstrip("/")

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        return pbegin | "Root" >> beam.Create([self.base]) | "ListRuns" >> beam.ParDo(ListRuns())
