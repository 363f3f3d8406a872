"""Reading and grading a run leaves no reference cycles behind.

Workers start a young collection only every 50,000 new containers (``transforms.heap``), so a
cycle made per run would hold its objects for long: a run listing kept by a self-calling closure
grew the plain loop's peak by ~11 MiB over 10k runs (make bench memory). Everything a run makes
must go by reference count alone.
"""

from __future__ import annotations

import gc
from pathlib import Path

from graders.families.trace_rules.config import default_config
from graders.grading.plan import PlanSet, default_plan
from graders.one_run import RunGrader
from graders.prepare import prepare_run
from graders.runs.runfiles import local_run_files
from transforms.discover import list_run

FLEET = Path(__file__).resolve().parents[2] / "examples" / "fleet"


def _grade_all(runs: list[str]) -> int:
    grader = RunGrader(PlanSet(default_plan()), default_config())
    graded = 0
    for rel in runs:
        list_run(str(FLEET), rel)
        try:
            prep = prepare_run(local_run_files(FLEET / rel), rel)
        except Exception:  # the sample fleet's malformed runs become dead letters
            continue
        grader.grade(prep)
        graded += 1
    return graded


def test_grading_the_sample_fleet_leaves_no_cyclic_garbage() -> None:
    runs = sorted(str(p.parent.relative_to(FLEET)) for p in FLEET.rglob("aw_info.json"))
    assert len(runs) > 20
    assert _grade_all(runs) > 20  # caches warmed, malformed runs included
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        _grade_all(runs)
        found = gc.collect()
        garbage = [type(o).__name__ for o in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert found == 0, garbage[:20]
