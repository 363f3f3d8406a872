"""The 22 gh-aw trajectory graders (docs/reference/graders.md §7-§8), registered in gh-aw order.

Each grader is a pure projection over the Trajectory IR found by ``ir.candidates``; every one
is wrapped by ``ir.with_limits`` (the global 5,000-item cap). Metadata matches gh-aw's
``TRAJECTORY_GRADER_META``: no thresholds, so a finite value is an informational pass.

Deliberate deviation: ``agent/graders/trajectory_ir.json`` is read and used as the last IR
candidate (see ``ir`` and docs/deviations-trajectory.md).
"""

from __future__ import annotations

# Built-ins register first whichever family is imported first: registry order is plan order.
from graders.families import builtin  # noqa: F401
from graders.families.trajectory import constraints, objectives, provenance, reference, rqa, sequence
from graders.families.trajectory.ir import TrajectoryFn, with_limits
from graders.grading.registry import grader

_L, _H = "lower_is_better", "higher_is_better"

# id, name, description, unit, direction, max (min is always 0), implementation
_GRADERS: tuple[tuple[str, str, str, str, str, float | None, TrajectoryFn], ...] = (
    ("policy-near-miss", "Policy Near-Miss Rate",
     "Fraction of successful traces that left guard or policy objectives unsatisfied",
     "ratio", _L, 1, objectives.policy_near_miss),
    ("skill-constraint-coverage", "Skill Constraint Coverage",
     "Fraction of configured skill constraints that were exercised and passed",
     "ratio", _H, 1, constraints.skill_constraint_coverage),
    ("exploration-error", "Exploration Error", "Unmet objectives attributable to insufficient search",
     "ratio", _L, 1, objectives.exploration_error),
    ("exploitation-error", "Exploitation Error",
     "Unmet objectives attributable to gathered evidence that was never used",
     "ratio", _L, 1, objectives.exploitation_error),
    ("state-revisit-probability-rep", "State Revisit Probability REP",
     "Fraction of canonical state visits that revisit an already visited state",
     "ratio", _L, 1, rqa.state_revisit_probability_rep),
    ("recurrence-determinism", "Recurrence Determinism (RQA DET)",
     "RQA DET: fraction of recurrent points forming diagonal (repeated-subsequence) lines",
     "ratio", _L, 1, rqa.recurrence_determinism),
    ("recurrence-laminarity", "Recurrence Laminarity (RQA LAM)",
     "RQA LAM: fraction of recurrent points forming vertical (stagnation) lines",
     "ratio", _L, 1, rqa.recurrence_laminarity),
    ("recurrence-trapping-time", "Recurrence Trapping Time (RQA TT)",
     "RQA TT: average length of vertical recurrence lines",
     "steps", _L, None, rqa.recurrence_trapping_time),
    ("recurrence-rate", "Recurrence Rate (RQA RR)", "RQA RR: density of recurrent state pairs across the run",
     "ratio", _L, 1, rqa.recurrence_rate),
    ("event-entropy-rate", "Event Entropy Rate",
     "Normalized conditional Shannon entropy rate of the ordered event sequence",
     "ratio", _H, 1, sequence.event_entropy_rate),
    ("lempel-ziv-trajectory-complexity", "Lempel-Ziv Trajectory Complexity",
     "Normalized LZ76 complexity of the canonical event sequence",
     "ratio", _H, 1, sequence.lempel_ziv_trajectory_complexity),
    ("tool-output-consumption-rate", "Tool Output Consumption Rate",
     "Fraction of tool outputs referenced by a later action",
     "ratio", _H, 1, provenance.tool_output_consumption_rate),
    ("end-to-end-lineage-completeness", "End-to-End Lineage Completeness",
     "Fraction of final outputs traceable to tool or observation evidence roots",
     "ratio", _H, 1, provenance.end_to_end_lineage_completeness),
    ("action-provenance-coverage", "Action Provenance Coverage",
     "Fraction of consequential actions with a provenance path to tool or observation evidence",
     "ratio", _H, 1, provenance.action_provenance_coverage),
    ("premature-termination-gap", "Premature Termination Gap",
     "Declared completion conditions still unsatisfied at termination",
     "count", _L, None, objectives.premature_termination_gap),
    ("evidence-saturation-stopping-lag", "Evidence Saturation Stopping Lag",
     "Events elapsed between all objectives being satisfied and the run stopping",
     "count", _L, None, objectives.evidence_saturation_stopping_lag),
    ("dependency-order-violation-rate", "Dependency Order Violation Rate",
     "Fraction of dependent objectives satisfied before their prerequisites",
     "ratio", _L, 1, objectives.dependency_order_violation_rate),
    ("objective-coverage", "Objective Coverage", "Fraction of declared objectives that were completed",
     "ratio", _H, 1, objectives.objective_coverage),
    ("grounding-accuracy", "Grounding Accuracy",
     "Fraction of actions that were valid in the state in which they were issued",
     "ratio", _H, 1, provenance.grounding_accuracy),
    ("tool-wise-score", "Tool-Wise Score",
     "Longest correct execution prefix against a reference trajectory, with parameter credit",
     "ratio", _H, 1, reference.tool_wise_score),
    ("trajectory-ndtw", "Trajectory nDTW",
     "Normalized dynamic time warping similarity to a reference state trajectory",
     "ratio", _H, 1, reference.trajectory_ndtw),
    ("code-search-recall", "Code Search Recall", "Fraction of reference patch files located during the run",
     "ratio", _H, 1, reference.code_search_recall),
)

# gh-aw's order, not the modules': registered from this table, each through the decorator.
for _id, _name, _desc, _unit, _dir, _max, _fn in _GRADERS:
    grader(_id, name=_name, description=_desc, unit=_unit, direction=_dir, min=0, max=_max,
           family="trajectory")(with_limits(_fn))
