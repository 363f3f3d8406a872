"""Discover run folders under ``--input`` (docs/architecture.md): the Beam step over the listing
core (graders/runs/storage.py), which lists and groups a fleet wherever it is stored."""

from __future__ import annotations

from collections.abc import Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics

from graders.runs import storage
from graders.runs.storage import FleetRuns, RunListing, hint_path
from transforms.beamfiles import store_for
from transforms.progress import DISCOVERED, FINISHED, Tally

__all__ = ["DiscoverRuns", "ListRuns", "RunListing", "hint_path", "list_run"]


def _entries(base: str) -> Iterator[tuple[str, int, float]]:
    """(path relative to ``base``, size, mtime seconds) of every file below ``base``, as listed."""
    return storage.entries(base, store_for(base))


def list_run(base: str, root_rel: str) -> list[tuple[str, int, float]]:
    """The sorted listing of one run folder, as ``ListRuns`` lists it within the fleet."""
    return storage.list_run(base, root_rel, store_for(base))


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
        for run in self._runs(base):
            tally.add(DISCOVERED)
            yield run

    def _runs(self, base: str) -> Iterator[RunListing]:
        grouping = FleetRuns(base)
        try:
            yield from grouping.runs(_entries(base))
        finally:
            self.files.inc(grouping.files)
            self.stray.inc(grouping.stray)


class DiscoverRuns(beam.PTransform):
    """``<input>/**`` → one (run root, sorted file listing) per run folder."""

    def __init__(self, base: str) -> None:
        super().__init__()
        self.base = base.rstrip("/")

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        return pbegin | "Root" >> beam.Create([self.base]) | "ListRuns" >> beam.ParDo(ListRuns())
