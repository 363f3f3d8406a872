"""The fleetgrade pipeline graph (design.md §2):

discover → decide (incremental state) → prepare → grade families + trace rules → write.

Only runs that are new, changed, or graded under another configuration are prepared and
graded; their earlier rows are dropped by identity and the rest of the output is left as it is.
"""

from __future__ import annotations

from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics

from graders.families.trace_rules.config import TraceConfig, default_config
from graders.grading.plan import PlanSet
from graders.prepare import PreparedRun
from graders.tables.state import GradingDigests, dead_state, drops_for, graded_state
from schemas.state_table import STATE_TABLE
from transforms.duplicates import ResolveDuplicates
from transforms.grade import GradeRuns
from transforms.incremental import KEEP, DiscoverAndDecide, kept_identity, stored_rows_of
from transforms.prepare import DEAD, DEAD_STATE, PrepareRun
from transforms.sink import Rows, TableWrites, WriteTables
from transforms.stats import DEFAULT_BASELINE, DEFAULT_WINDOW, FleetStats
from transforms.trace_verdicts import GradeTraceRules, TaskReliability


class _Window(beam.DoFn):
    """Runs dated outside --since/--until are not graded now; their earlier state is kept."""

    def __init__(self, since: str | None, until: str | None) -> None:
        self.since, self.until = since, until
        self.skipped = Metrics.counter("fleetgrade", "runs_prepared_out_of_window")

    def process(self, prep: PreparedRun) -> Any:
        date = prep.meta.date
        if (self.since is not None and date < self.since) or (self.until is not None and date > self.until):
            self.skipped.inc()
            if prep.previous is not None:
                yield beam.pvalue.TaggedOutput(KEEP, prep.previous)
            return
        yield prep


class _StateRows(beam.DoFn):
    """The new ``_state`` row of a graded run or of a dead-lettered one."""

    def __init__(self, plans: PlanSet, cfg: TraceConfig) -> None:
        self.plans, self.cfg = plans, cfg

    def setup(self) -> None:
        self.digests = GradingDigests(self.plans, self.cfg)

    def process(self, item: PreparedRun | tuple[dict[str, Any], str, Any]) -> Any:
        if isinstance(item, PreparedRun):
            m = item.meta
            yield graded_state(m.root, item.listing_digest, self.digests.for_workflow(m.workflow), m.workflow,
                               m.date, m.run_id, m.attempt)
            return
        row, digest, _ = item
        yield dead_state(row["input"], digest, self.digests.for_workflow(row.get("workflow")),
                         row.get("workflow"), row.get("date"))


def build(
    p: beam.Pipeline,
    input_base: str,
    output: str,
    plans: PlanSet,
    token: str,
    trace_config: TraceConfig | None = None,
    full: bool = False,
    since: str | None = None,
    until: str | None = None,
    resource_hints: bool = False,
    regression_window: int = DEFAULT_WINDOW,
    regression_baseline: int = DEFAULT_BASELINE,
) -> beam.PCollection:
    """Adds the whole graph to ``p``; returns the committed partition paths.

    ``resource_hints`` asks distributed runners for more memory on the sandboxed families;
    ``regression_window``/``regression_baseline`` are the days of the ``regressions`` windows.
    """
    cfg = trace_config or default_config()
    # Listed and decided against the stored state in one step.
    todo, decided_kept = p | "Discover" >> DiscoverAndDecide(input_base, output, plans, cfg, full, since, until)
    # One folder per (workflow, run id, attempt): extra copies become dead letters here.
    unique = (todo, decided_kept) | "Identity" >> ResolveDuplicates(input_base)
    prepared = unique.runs | "Prepare" >> beam.ParDo(PrepareRun(input_base)).with_output_types(
        PreparedRun).with_outputs(DEAD, DEAD_STATE, main="runs")
    windowed = prepared.runs | "Window" >> beam.ParDo(_Window(since, until)).with_output_types(
        PreparedRun).with_outputs(KEEP, main="runs")
    runs = windowed.runs
    graded = runs | "Grade" >> GradeRuns(plans, resource_hints)

    # Per-run collections reach the sink as several collections of a table, not flattened: the
    # local runner materializes every Flatten, which held a row per run of the fleet (make bench memory).
    kept = {"unchanged": decided_kept, "out-of-window": windowed[KEEP]}
    state = {
        **kept,
        "graded": runs | "GradedState" >> beam.ParDo(_StateRows(plans, cfg)),
        "dead": prepared[DEAD_STATE] | "DeadState" >> beam.ParDo(_StateRows(plans, cfg)),
        "duplicate": unique[DEAD_STATE] | "DuplicateState" >> beam.ParDo(_StateRows(plans, cfg)),
    }
    drops = (
        runs | "PreviousRows" >> beam.FlatMap(lambda prep: drops_for(prep.previous)),
        prepared[DEAD_STATE] | "PreviousDeadRows" >> beam.FlatMap(lambda item: drops_for(item[2])),
        unique[DEAD_STATE] | "PreviousDuplicateRows" >> beam.FlatMap(lambda item: drops_for(item[2])),
    ) | "FlattenDrops" >> beam.Flatten()

    # task_reliability covers every run of a task: the new verdicts plus the stored verdicts of
    # runs that were not regraded this time. Only the kept runs' identities are shuffled, grouped
    # by partition; each partition's stored verdicts are read where they are carried, so they
    # never cross a shuffle (the local runner held a stored verdict per kept run, ~1.7 KB).
    carried = (
        tuple(
            part | f"GradedKept[{name}]" >> beam.Filter(lambda s: s.get("outcome") == "graded")
            | f"KeyKept[{name}]" >> beam.Map(kept_identity)
            for name, part in kept.items()
        )
        | "FlattenKeptKeys" >> beam.Flatten()
        | "GroupKeptByPartition" >> beam.GroupByKey()
        | "CarriedVerdicts" >> beam.FlatMap(lambda kv, out: stored_rows_of(out, "trace_verdicts", kv), output)
    )
    rules = runs | "TraceRules" >> GradeTraceRules(cfg)
    verdicts = rules["verdicts"]
    reliability = (verdicts, carried) | "Reliability" >> TaskReliability()

    # Fleet statistics over the windows holding this job's regraded (or dropped) runs.
    stats = {"grader_results": graded["grader_results"], "trace_verdicts": verdicts,
             "drops": drops} | "Stats" >> FleetStats(output, regression_window, regression_baseline)

    tables: dict[str, Rows] = {
        "grader_results": tuple(graded["grader_results"].values()),
        "runs": (*graded["runs"].values(), rules["failed"]),
        "dead_letter": (prepared[DEAD], unique[DEAD], rules["dead_letter"], *graded["dead_letter"].values()),
        "trace_verdicts": verdicts,
        "task_reliability": reliability,
        "grader_stats": stats["grader_stats"],
        "regressions": stats["regressions"],
        STATE_TABLE: tuple(state.values()),
    }
    return TableWrites(tables, drops=(drops, stats["drops"])) | "Write" >> WriteTables(output, token)
