"""Read + preprocess: one DoFn per run, bad runs to the dead letter (design.md §2)."""

from __future__ import annotations

import logging
import pickle
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics

from graders.layout import layout_hints
from graders.prepare import PreparedRun, prepare_run
from graders.rows import dead_letter_row
from transforms.beamfiles import beam_run_files, join
from transforms.discover import RunListing

DEAD = "dead_letter"
LOG = logging.getLogger("fleetgrade")


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


class PrepareRun(beam.DoFn):
    """(run root, listing) → PreparedRun, or a dead-letter row naming the run and the problem."""

    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")
        self.prepared = Metrics.counter("fleetgrade", "runs_prepared")
        self.dead = Metrics.counter("fleetgrade", "runs_dead_lettered")
        self.bytes = Metrics.counter("fleetgrade", "bytes_read")

    def process(self, element: RunListing) -> Iterator[Any]:
        root_rel, listing = element
        root = join(self.base, root_rel)
        files = beam_run_files(root, listing)
        try:
            prep: PreparedRun = prepare_run(files, root_rel)
        except Exception as exc:  # every ungradable run becomes a row, never a failed job
            self.dead.inc()
            LOG.warning("dead letter: %s: %s", root, exc)
            # Partition the dead letter by what the path says, when it says anything.
            workflow, run_id, date = layout_hints(root_rel)
            row = dead_letter_row(root, "prepare", exc, run_id=run_id, workflow=workflow, date=date)
            yield beam.pvalue.TaggedOutput(DEAD, row)
            return
        finally:
            self.bytes.inc(files.bytes_read)
        self.prepared.inc()
        yield prep
