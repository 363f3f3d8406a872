"""The fleetgrade pipeline graph: discover → prepare → grade families → write (design.md §2)."""

from __future__ import annotations

import apache_beam as beam

from graders.plan import PlanSet
from graders.trace_rules.config import TraceConfig, default_config
from transforms.discover import DiscoverRuns
from transforms.grade import GradeRuns
from transforms.prepare import DEAD, PrepareRun
from transforms.sink import WritePartitionedParquet
from transforms.trace_verdicts import GradeTraceRules


def build(
    p: beam.Pipeline,
    input_base: str,
    output: str,
    plans: PlanSet,
    token: str,
    trace_config: TraceConfig | None = None,
) -> beam.PCollection:
    """Adds the whole graph to ``p``; returns the committed partition paths."""
    listings = p | "Discover" >> DiscoverRuns(input_base)
    prepared = listings | "Prepare" >> beam.ParDo(PrepareRun(input_base)).with_outputs(DEAD, main="runs")
    graded = prepared.runs | "Grade" >> GradeRuns(plans)
    dead = (prepared[DEAD], graded["dead_letter"]) | "FlattenDeadLetters" >> beam.Flatten()
    rules = prepared.runs | "TraceRules" >> GradeTraceRules(trace_config or default_config())
    tables = {
        "grader_results": graded["grader_results"],
        "runs": graded["runs"],
        "dead_letter": dead,
        "trace_verdicts": rules["trace_verdicts"],
        "task_reliability": rules["task_reliability"],
    }
    return tables | "Write" >> WritePartitionedParquet(output, token)
