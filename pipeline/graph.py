"""The fleetgrade pipeline graph, as the named stages of transforms/stages.py:

ReadRuns (discover, decide against the stored state, one folder per run identity) → Prepare →
Grade (each run end to end, graders/one_run.py) → TraceVerdicts, TrackState, FleetStats, CostOutliers →
WriteTables.

Only runs that are new, changed, or graded under another configuration are prepared and
graded; their earlier rows are dropped by identity and the rest of the output is left as it is.
"""

from __future__ import annotations

import apache_beam as beam

from graders.families.trace_rules.config import TraceConfig, default_config
from graders.grading.plan import PlanSet
from graders.stats.outliers import DEFAULT_DAYS, DEFAULT_FACTOR
from schemas.state_table import STATE_TABLE
from transforms.cost import CostOutliers
from transforms.grade import Grade
from transforms.incremental import forget_damaged
from transforms.sink import TableWrites, WriteTables
from transforms.stages import Prepare, ReadRuns, TraceVerdicts, TrackState
from transforms.stats import DEFAULT_BASELINE, DEFAULT_WINDOW, FleetStats


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
    outlier_factor: float = DEFAULT_FACTOR,
    outlier_days: int = DEFAULT_DAYS,
) -> beam.PCollection:
    """Adds the whole graph to ``p``; returns the committed partition paths.

    ``resource_hints`` asks distributed runners for more memory on the Grade step when a family
    is sandboxed;
    ``regression_window``/``regression_baseline`` are the days of the ``regressions`` windows;
    ``outlier_factor``/``outlier_days`` the k and N of ``cost_outliers``.
    """
    forget_damaged()  # each job names the damaged files it meets
    cfg = trace_config or default_config()
    found = p | "ReadRuns" >> ReadRuns(input_base, output, plans, cfg, full, since, until)
    prepared = found["runs"] | "Prepare" >> Prepare(input_base, since, until)
    graded = prepared["runs"] | "Grade" >> Grade(plans, cfg, resource_hints)
    kept = {"unchanged": found["kept"], "out-of-window": prepared["kept"]}
    dead_states = {"prepare": prepared["dead_state"], "duplicate": found["dead_state"]}
    tracked = {"graded": prepared["runs"], "dead": dead_states} | "TrackState" >> TrackState(plans, cfg)
    reliability = {"verdicts": graded["trace_verdicts"], "kept": kept} | "TraceVerdicts" >> TraceVerdicts(output)
    stats = {"observations": graded["stats"],
             "drops": tracked["drops"]} | "Stats" >> FleetStats(output, regression_window, regression_baseline)
    cost = {"runs": graded["runs"], "drops": tracked["drops"]} | "CostOutliers" >> CostOutliers(
        output, outlier_factor, outlier_days)
    tables = {
        "grader_results": graded["grader_results"],
        "runs": graded["runs"],
        "dead_letter": (prepared["dead"], found["dead"], graded["dead_letter"], graded["crashed"]),
        "trace_verdicts": graded["trace_verdicts"],
        "grader_drift": graded["grader_drift"],
        "task_reliability": reliability["rows"],
        "grader_stats": stats["grader_stats"],
        "regressions": stats["regressions"],
        "cost_outliers": cost["cost_outliers"],
        STATE_TABLE: (*kept.values(), *tracked["state"].values()),
    }
    drops = (tracked["drops"], stats["drops"], cost["drops"], reliability["damaged"], found["drops"])
    # --full regrades every run a damaged partition held in this job already.
    return TableWrites(tables, drops=drops) | "WriteTables" >> WriteTables(output, token, regrade_damaged=not full)
