"""Regrade stored runs at an evidence time: ``observations`` rows.

Each prepared run with an archived operational-value evaluator is regraded by the pure core
(``graders.families.opvalue.regrade``); the original artifacts are only read. Runs without an
evaluator are skipped and counted; a run whose archive does not verify (digests, a missing
original result) gets an ``error`` observation saying why. A run that cannot be prepared is the
``dead_letter`` row ``fleetgrade run`` writes for it (stage ``prepare``, the same identity and
bytes), so a regrade never adds a second row for one input.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics

from graders.families.opvalue.regrade import error_observation, regrade
from graders.families.opvalue.sandbox import SandboxOptions
from graders.prepare import PreparedRun
from graders.replay import has_archived_evaluator, regrade_input
from transforms.beamfiles import beam_run_files
from transforms.prepare import PrepareRun, RunToRead

OBSERVATIONS = "observations"
DROPS = "drops"  # the side output of the stored rows a regrade replaces
STAGE = "regrade"  # the dead-letter stage older builds wrote regrade failures with (dropped now)
LOG = logging.getLogger("fleetgrade")


Listing = list[tuple[str, int]]


class PrepareForRegrade(beam.DoFn):
    """``PrepareRun``'s outputs, each prepared run with its listing: the regrade reads the run's
    archive files."""

    def __init__(self, base: str) -> None:
        self.prepare = PrepareRun(base)

    def setup(self) -> None:
        self.prepare.setup()

    def finish_bundle(self) -> None:
        self.prepare.finish_bundle()

    def process(self, element: RunToRead) -> Iterator[Any]:  # a RunListing: regrade is not incremental
        for out in self.prepare.process(element):
            yield out if isinstance(out, beam.pvalue.TaggedOutput) else (out, element[1])


def older_regrade_dead_letter(row: dict[str, Any]) -> tuple[str, Any, Any, tuple[str, str]]:
    """The drop of the stage ``regrade`` copy an older build wrote of a dead letter (``row``'s input)."""
    return "dead_letter", row.get("workflow"), row.get("date"), (row["input"], STAGE)


class Regrade(beam.DoFn):
    """(PreparedRun, listing) → an observations row (an ``error`` one when the archive does not
    verify), or nothing (skipped). Also emits a drop of the run's stage ``regrade`` dead letter,
    which older builds wrote, so no input stays listed twice."""

    def __init__(self, evidence_at: str, allow_unsandboxed: bool = False) -> None:
        self.evidence_at = evidence_at
        self.allow_unsandboxed = allow_unsandboxed
        self.options: SandboxOptions | None = None
        self.regraded = Metrics.counter("fleetgrade", "runs_regraded")
        self.skipped = Metrics.counter("fleetgrade", "runs_regrade_skipped")
        self.failed = Metrics.counter("fleetgrade", "runs_regrade_failed")

    def setup(self) -> None:
        self.options = SandboxOptions(allow_unsandboxed=self.allow_unsandboxed)

    def process(self, element: tuple[PreparedRun, Listing]) -> Iterator[Any]:
        prep, listing = element
        m = prep.meta
        files = beam_run_files(m.root, listing)
        drop = beam.pvalue.TaggedOutput(DROPS, ("dead_letter", m.workflow, m.date, (m.root, STAGE)))
        if not has_archived_evaluator(files):
            self.skipped.inc()
            yield drop
            return
        run = None
        try:
            run = regrade_input(prep, files)
            row = regrade(run, self.evidence_at, self.options)
        except Exception as exc:  # one untrustworthy or unrunnable run must not fail the job
            self.failed.inc()
            LOG.warning("not regraded: %s: %s", m.root, exc)
            yield drop
            if run is not None:
                yield error_observation(run, self.evidence_at, exc)
            return
        self.regraded.inc()
        yield drop
        yield row
