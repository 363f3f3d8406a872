"""The timeout breaker (graders.grading.engine.TimeoutBreaker): a sandboxed grader that timed out on
K consecutive runs is errored, unrun, for the rest of the job, saying why; and through the
executable, a looping inline grader costs its time limit on K runs only."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from graders.families.inline_js.sandbox import JsGraderError
from graders.grading.engine import TimeoutBreaker, grade_one
from graders.grading.plan import PlanEntry
from graders.grading.registry import GraderContext
from tests.conftest import REPO


class Script:
    """An executor whose outcome per call is scripted: "timeout", "error" or a value."""

    def __init__(self, *outcomes: Any) -> None:
        self.outcomes, self.calls = list(outcomes), 0

    def __call__(self, entry: PlanEntry, trace: dict[str, Any], ctx: GraderContext) -> Any:
        outcome = self.outcomes[self.calls]
        self.calls += 1
        if outcome == "timeout":
            raise JsGraderError("Script execution timed out after 5000ms")
        if outcome == "error":
            raise JsGraderError("boom")
        return {"value": outcome}


def entry(gid: str = "loop", digest: str = "d1") -> PlanEntry:
    return PlanEntry(id=gid, name=gid, source="inline", family="inline", script="while (true) {}", digest=digest)


def _errors(breaker: TimeoutBreaker, n: int, e: PlanEntry | None = None) -> list[str | None]:
    return [grade_one(e or entry(), {}, GraderContext(), {"inline": breaker}).get("error") for _ in range(n)]


def test_k_consecutive_timeouts_stop_the_grader_at_no_further_cost() -> None:
    inner = Script("timeout", "timeout", "timeout")
    errors = _errors(TimeoutBreaker(inner, 3), 6)
    assert errors[:3] == ["grader loop runtime error: Script execution timed out after 5000ms"] * 3
    assert errors[3:] == ["grader loop runtime error: not run: it timed out on 3 consecutive runs of this job, so "
                          "it is errored for the rest of the job (--grader-timeout-limit)"] * 3
    assert inner.calls == 3  # never called again


def test_any_other_outcome_resets_the_count_and_graders_count_apart() -> None:
    inner = Script("timeout", "timeout", 1, "timeout", "timeout", "error", "timeout", "timeout", 2)
    breaker = TimeoutBreaker(inner, 3)
    assert _errors(breaker, 9).count(None) == 2 and inner.calls == 9  # never three in a row: never stopped
    other = Script("timeout", "timeout", "timeout", 5)
    shared = TimeoutBreaker(other, 3, breaker.streaks)
    _errors(shared, 3)
    # A changed script (another digest) starts afresh; so does another grader.
    assert _errors(shared, 1, entry(digest="d2")) == [None] and other.calls == 4


def test_zero_never_stops_and_a_bound_executor_shares_the_counts() -> None:
    inner = Script(*["timeout"] * 5)
    _errors(TimeoutBreaker(inner, 0), 5)
    assert inner.calls == 5

    class Bindable(Script):
        def for_run(self, subject: Any) -> Script:
            return self

    bound_inner = Bindable("timeout", "timeout", "timeout")
    breaker = TimeoutBreaker(bound_inner, 2)
    for _ in range(3):
        _errors(breaker.for_run("run"), 1)  # each run binds anew, as operational-value's executor is
    assert bound_inner.calls == 2
    assert not hasattr(TimeoutBreaker(Script(), 2), "for_run")  # only what the executor has


@pytest.mark.slow
def test_a_looping_inline_grader_costs_its_limit_on_k_runs_only(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet"
    runs = sorted((REPO / "examples" / "fleet" / "ci-doctor").glob("run-709*"))[:6]
    for run in runs:
        shutil.copytree(run, fleet / "ci-doctor" / run.name)
    graders = tmp_path / "graders.yaml"
    graders.write_text("graders:\n  spin:\n    script: |\n      while (true) {}\n  tool-calls:\n"
                       "    script: |\n      return { value: trace.toolCalls.length }\n")
    out = tmp_path / "out"
    done = subprocess.run([str(Path(sys.executable).parent / "fleetgrade"), "run", "--input", str(fleet), "--output",
                           str(out), "--graders", str(graders), "--grader-timeout-limit", "2"],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    rows = duckdb.sql(f"SELECT grader_id, status, error FROM read_parquet('{out}/grader_results/*/*/*.parquet') "
                      "WHERE source = 'inline' ORDER BY ALL").fetchall()
    spin = [r for r in rows if r[0] == "spin"]
    assert len(spin) == 6 and all(r[1] == "error" for r in spin)
    assert sum("Script execution timed out after 5000ms" in r[2] for r in spin) == 2
    assert sum("not run: it timed out on 2 consecutive runs of this job" in r[2] for r in spin) == 4
    # The other inline grader, in the same sandbox, graded every run.
    assert [r[2] for r in rows if r[0] == "tool-calls"] == [None] * 6
