"""Regrade stored runs at an evidence time: ``observations`` rows; failures to the dead letter.

Each prepared run with an archived operational-value evaluator is regraded by the pure core
(``graders.families.opvalue.regrade``); the original artifacts are only read. Runs without an evaluator
are skipped and counted; integrity failures (digests, missing original result) and runs that
cannot be prepared become ``dead_letter`` rows with stage ``regrade``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics

from graders.families.opvalue.regrade import regrade
from graders.families.opvalue.sandbox import SandboxOptions
from graders.prepare import PreparedRun
from graders.replay import has_archived_evaluator, regrade_input
from graders.tables.rows import dead_letter_row
from transforms.beamfiles import beam_run_files
from transforms.prepare import DEAD, PrepareRun, RunToRead

OBSERVATIONS = "observations"
DROPS = "drops"  # the side output of the stored rows a regrade replaces
STAGE = "regrade"
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


def as_regrade_dead_letter(row: dict[str, Any]) -> dict[str, Any]:
    """A run that could not be prepared is this command's failure, not the grading run's."""
    return {**row, "stage": STAGE}


class Regrade(beam.DoFn):
    """(PreparedRun, listing) → an observations row, a dead-letter row, or nothing (skipped).

    Also emits a drop of the run's earlier regrade dead letter when it regrades (or is skipped)
    now, so a fixed run does not stay listed as failed.
    """

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
        try:
            row = regrade(regrade_input(prep, files), self.evidence_at, self.options)
        except Exception as exc:  # one untrustworthy or unrunnable run must not fail the job
            self.failed.inc()
            LOG.warning("regrade dead letter: %s: %s", m.root, exc)
            yield beam.pvalue.TaggedOutput(
                DEAD, dead_letter_row(m.root, STAGE, exc, run_id=m.run_id, workflow=m.workflow, date=m.date)
            )
            return
        self.regraded.inc()
        yield drop
        yield row
