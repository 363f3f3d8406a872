"""The fleetgrade pipeline graph: discover → prepare → grade families → write (design.md §2)."""

from __future__ import annotations

import apache_beam as beam

from graders.plan import PlanSet
from graders.prepare import PreparedRun
from transforms.discover import DiscoverRuns
from transforms.grade import GradeRuns
from transforms.prepare import DEAD, PrepareRun
from transforms.sink import WritePartitionedParquet


def build(p: beam.Pipeline, input_base: str, output: str, plans: PlanSet, token: str) -> beam.PCollection:
    """Adds the whole graph to ``p``; returns the committed partition paths."""
    listings = p | "Discover" >> DiscoverRuns(input_base)
    prepared = listings | "Prepare" >> (
        beam.ParDo(PrepareRun(input_base)).with_output_types(PreparedRun).with_outputs(DEAD, main="runs")
    )
    graded = prepared.runs | "Grade" >> GradeRuns(plans)
    dead = (prepared[DEAD], graded["dead_letter"]) | "FlattenDeadLetters" >> beam.Flatten()
    tables = {
        "grader_results": graded["grader_results"],
        "runs": graded["runs"],
        "dead_letter": dead,
    }
    return tables | "Write" >> WritePartitionedParquet(output, token)
