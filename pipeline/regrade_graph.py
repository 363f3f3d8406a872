"""The regrade graph: discover → prepare → regrade → write ``observations`` and ``dead_letter``.

Only those two tables are written, so the original results (``grader_results``, ``runs``, …)
in the same output folder are never rewritten; ``dead_letter`` gets only the rows ``fleetgrade
run`` writes for runs that cannot be prepared (the same rows: its partitions stay byte-identical).
"""

from __future__ import annotations

import apache_beam as beam

from graders.prepare import PreparedRun
from transforms.discover import DiscoverRuns
from transforms.prepare import DEAD
from transforms.regrade import DROPS, OBSERVATIONS, PrepareForRegrade, Regrade, older_regrade_dead_letter
from transforms.sink import TableWrites, WriteTables


def build(
    p: beam.Pipeline,
    input_base: str,
    output: str,
    evidence_at: str,
    token: str,
    allow_unsandboxed: bool = False,
) -> beam.PCollection:
    """Adds the whole graph to ``p``; returns the committed partition paths."""
    listings = p | "Discover" >> DiscoverRuns(input_base)
    # Typed, so Beam sizes a prepared run by its coder's estimate instead of pickling it (a trace
    # nested 600 deep is past pickle's recursion limit): the run graph's Prepare is typed alike.
    prepared = listings | "Prepare" >> beam.ParDo(PrepareForRegrade(input_base)).with_output_types(
        tuple[PreparedRun, list[tuple[str, int]]]).with_outputs(DEAD, main="runs")
    regraded = prepared.runs | "Regrade" >> beam.ParDo(Regrade(evidence_at, allow_unsandboxed)).with_outputs(
        DROPS, main=OBSERVATIONS
    )
    # A run that cannot be prepared: the dead letter `run` writes for it, identical, replacing it.
    older = prepared[DEAD] | "OlderRegradeDeadLetters" >> beam.Map(older_regrade_dead_letter)
    tables = {OBSERVATIONS: regraded[OBSERVATIONS], "dead_letter": prepared[DEAD]}
    return TableWrites(tables, drops=(regraded[DROPS], older)) | "Write" >> WriteTables(output, token)
