"""Discover run folders under ``--input`` (design.md §2, "Discover")."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.metrics import Metrics

from graders.layout import run_root_of

# (run root relative to input, [(rel, size, mtime seconds)])
RunListing = tuple[str, list[tuple[str, int, float]]]


class _KeyByRun(beam.DoFn):
    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")
        self.files = Metrics.counter("fleetgrade", "files_discovered")
        self.stray = Metrics.counter("fleetgrade", "stray_files_skipped")

    def process(self, meta: Any) -> Iterator[tuple[str, tuple[str, int, float]]]:
        # `meta` is a FileMetadata(path, size_in_bytes) from MatchFiles.
        path: str = meta.path
        if not path.startswith(self.base + "/"):
            return
        rel = path[len(self.base) + 1 :]
        root = run_root_of(rel)
        self.files.inc()
        if root is None:
            self.stray.inc()
            return
        mtime = float(getattr(meta, "last_updated_in_seconds", 0.0) or 0.0)
        yield root, (rel[len(root) + 1 :], int(meta.size_in_bytes), mtime)


def _sorted_listing(kv: tuple[str, Iterable[tuple[str, int, float]]]) -> RunListing:
    root, files = kv
    return root, sorted(files)


class DiscoverRuns(beam.PTransform):
    """``<input>/**`` → one (run root, sorted file listing) per run folder."""

    def __init__(self, base: str) -> None:
        super().__init__()
        self.base = base.rstrip("/")

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        return (
            pbegin
            | "Match" >> fileio.MatchFiles(self.base + "/**")
            | "KeyByRun" >> beam.ParDo(_KeyByRun(self.base))
            | "GroupByRun" >> beam.GroupByKey()
            | "SortListing" >> beam.Map(_sorted_listing)
        )
