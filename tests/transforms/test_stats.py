"""transforms/stats.py: the daily-cell combiner, the incremental plan, and the Beam graph."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.stats.cells import (
    DELIVERED,
    CellAcc,
    Observation,
    RunCells,
    SeriesCells,
    merged,
    partition_observations,
    run_observations,
    stats_rows,
)
from graders.tables.parquet import encode_table
from graders.tables.paths import partition_file
from tests.helpers.beam import local_test_pipeline
from tests.helpers.combiners import assert_combiner_equivalent
from transforms.combine import CombineInBundle
from transforms.stats import FleetStats, IdentsCombineFn, SeriesCombineFn, plan

OBS = st.builds(
    Observation,
    task=st.sampled_from(["a", "b", "c"]),
    value=st.one_of(st.none(), st.floats(-5, 5)),
    passed=st.one_of(st.none(), st.booleans()),
    status=st.sampled_from(["pass", "fail", "error", "unavailable"]),
    direction=st.sampled_from(["", "higher_is_better"]),
    unit=st.sampled_from(["", "ratio"]),
)


DATED = st.tuples(st.sampled_from(["2026-11-01", "2026-11-02"]), OBS)


@settings(max_examples=60, deadline=None)
@given(st.lists(DATED, max_size=16))
def test_series_combiner_plans_agree(observations: list[tuple[str, Observation]]) -> None:
    out = assert_combiner_equivalent(SeriesCombineFn(), observations)
    # The rows derived from the accumulator agree too (they are what is written), and so does
    # the accumulator after a shuffle.
    rows = stats_rows("wf", "g", out.days, sorted(out.days), windows=(1, 7))
    back = pickle.loads(pickle.dumps(assert_combiner_equivalent(SeriesCombineFn(), observations[::-1])))
    assert back == out
    assert rows == stats_rows("wf", "g", back.days, sorted(back.days), windows=(1, 7))


@settings(max_examples=60, deadline=None)
@given(st.lists(OBS, max_size=24))
def test_a_cell_crosses_a_shuffle_whole(observations: list[Observation]) -> None:
    acc = CellAcc()
    for o in observations:
        acc.add(o)
    packed = pickle.dumps(acc)
    back = pickle.loads(packed)
    # Still deflated: passed on without decoding (the scalars travel beside the packed values).
    assert pickle.dumps(back) == packed and (back.error, back.unavailable) == (acc.error, acc.unavailable)
    assert back == acc and back.n == acc.n and back.passes == acc.passes
    day = "2026-11-01"
    assert stats_rows("wf", "g", {day: back}, [day], windows=(1,)) == stats_rows(
        "wf", "g", {day: acc}, [day], windows=(1,))


def test_a_cell_of_scheduled_runs_is_held_flat() -> None:
    """One task per run (a scheduled workflow): on the shuffle a value costs less than its task
    name and its 8-byte float held raw (a list per task cost ~23 bytes a value beyond the names)."""
    acc = CellAcc()
    for i in range(5000):
        acc.add(Observation(f"run:{10_000_000 + i}", i / 7, i % 2 == 0, "pass"))
    size = len(pickle.dumps(acc, protocol=pickle.HIGHEST_PROTOCOL))
    names = sum(len(f"run:{10_000_000 + i}") for i in range(5000))
    assert size < names + 5000 * 8
    assert acc.values["run:10000003"] == [3 / 7] and acc.passes["run:10000003"] == [0]


@pytest.mark.parametrize("grouped", [False, True])
def test_combine_in_bundle_flushes_partials_that_merge_into_the_cells_of_all(grouped: bool) -> None:
    obs = [(("wf", "g" if i % 3 else "h"), (f"2026-11-0{1 + i % 2}", Observation(f"t{i % 5}", i / 4, i % 2 == 0,
                                                                                  "pass")))
           for i in range(40)]
    whole: dict[Any, SeriesCells] = {}
    for key, (date, o) in obs:
        whole.setdefault(key, SeriesCells()).add(date, o)

    def merge_all(kv: tuple[Any, list[SeriesCells]]) -> tuple[Any, SeriesCells, int]:
        out = SeriesCells()
        for part in kv[1]:
            out.merge(part)
        return kv[0], out, len(kv[1])

    with local_test_pipeline() as p:
        if grouped:  # elements holding several inputs each, exploded by the step itself
            groups = [obs[i:i + 3] for i in range(0, len(obs), 3)]
            partials = p | beam.Create(groups) | beam.ParDo(CombineInBundle(SeriesCombineFn(), 4, _each))
        else:
            partials = p | beam.Create(obs) | beam.ParDo(CombineInBundle(SeriesCombineFn(), budget=4))
        out = partials | beam.GroupByKey() | beam.Map(merge_all)
        assert_that(out | beam.MapTuple(lambda k, acc, _n: (k, acc)), equal_to(list(whole.items())), label="cells")
        # 40 inputs with a budget of 4: at least ten flushes, so more partials than keys.
        assert_that(out | beam.MapTuple(lambda _k, _acc, n: n) | beam.CombineGlobally(sum), _at_least(10),
                    label="flushed")


def _each(group: list[Any]) -> list[Any]:
    return group


def _at_least(n: int) -> Any:
    def check(actual: list[int]) -> None:
        assert len(actual) == 1 and actual[0] >= n, actual
    return check


def test_plan_recomputes_only_windows_holding_touched_dates() -> None:
    stored = [("wf", f"2026-11-{d:02d}") for d in range(1, 31)] + [("other", "2026-11-01")]
    p = plan([("wf", "2026-11-10")], stored, window=7, baseline=28)
    assert set(p) == {"wf"}, "an untouched workflow is not recomputed"
    ends = p["wf"]["ends"]
    assert ends[0] == "2026-11-10" and ends[-1] == "2026-11-30" and len(ends) == 21
    assert p["wf"]["latest"] == "2026-11-30"  # 11-10 lies in [11-30 − 34, 11-30]
    assert p["wf"]["read"][0] == "2026-11-01" and p["wf"]["read"][-1] == "2026-11-30"


def test_plan_leaves_the_regression_cell_when_the_touched_date_is_older_than_its_windows() -> None:
    stored = [("wf", "2026-09-01"), ("wf", "2026-11-30")]
    p = plan([("wf", "2026-09-01")], stored, window=7, baseline=28)
    assert p["wf"] == {"ends": ["2026-09-01"], "latest": None, "read": ["2026-09-01"]}


def test_plan_of_a_first_run_covers_the_new_dates() -> None:
    p = plan([("wf", "2026-11-02"), ("wf", "2026-11-01")], [], window=7, baseline=28)
    assert p["wf"]["ends"] == ["2026-11-01", "2026-11-02"] and p["wf"]["latest"] == "2026-11-02"


def _result(run: int, date: str, value: float) -> dict[str, Any]:
    return {"workflow": "wf", "date": date, "run_id": str(run), "attempt": 1, "grader_id": "g", "value": value,
            "passed": value >= 0.5, "status": "pass", "direction": "higher_is_better", "unit": "ratio"}


def _verdict(run: int, date: str, task: str) -> dict[str, Any]:
    return {"workflow": "wf", "date": date, "run_id": str(run), "attempt": 1, "task": task, "delivered": True}


def _runs(results: list[dict[str, Any]], verdicts: list[dict[str, Any]]) -> list[RunCells]:
    """The Grade step's ``stats`` output: each run's rows through run_observations."""
    ids = sorted({(r["run_id"], r["attempt"]) for r in (*results, *verdicts)})
    return [cells for run in ids for cells in run_observations(
        [r for r in results if (r["run_id"], r["attempt"]) == run],
        [v for v in verdicts if (v["run_id"], v["attempt"]) == run])]


def test_fleet_stats_on_an_empty_output(tmp_path: Path) -> None:
    results = [_result(i, "2026-11-01", i / 10) for i in range(6)]
    verdicts = [_verdict(i, "2026-11-01", f"wf#{i % 3}") for i in range(6)]
    with local_test_pipeline() as p:
        out = {
            "observations": p | "R" >> beam.Create(_runs(results, verdicts)),
            "drops": p | "D" >> beam.Create([]),
        } | FleetStats(str(tmp_path))
        summary = out["grader_stats"] | beam.Map(lambda r: (r["grader_id"], r["window_days"], r["n"], r["n_tasks"],
                                                            r["mean"], r["pass_count"]))
        assert_that(summary, equal_to([
            ("g", 1, 6, 3, 0.25, 1), ("g", 7, 6, 3, 0.25, 1), ("g", 28, 6, 3, 0.25, 1),
            (DELIVERED, 1, 6, 3, 1.0, 6), (DELIVERED, 7, 6, 3, 1.0, 6), (DELIVERED, 28, 6, 3, 1.0, 6)]),
            label="stats")
        verdict = out["regressions"] | beam.Map(lambda r: (r["grader_id"], r["verdict"], r["n_current"],
                                                           r["runs_needed"]))
        assert_that(verdict, equal_to([("g", "insufficient-data", 6, 5), (DELIVERED, "insufficient-data", 6, 5)]),
                    label="regressions")
        assert_that(out["drops"], equal_to([]), label="drops")


def test_plan_retests_every_workflow_when_the_stored_windows_differ() -> None:
    stored = [("wf", f"2026-11-{d:02d}") for d in range(1, 31)] + [("other", d) for d in ("2026-09-01", "2026-10-20", "2026-10-31")]
    touched = [("wf", "2026-11-30")]
    assert set(plan(touched, stored, window=7, baseline=28)) == {"wf"}
    p = plan(touched, stored, window=7, baseline=28, retest_all=True)
    # The untouched workflow's regression cell is retested from the partitions its windows span;
    # its grader_stats are left alone.
    assert p["other"] == {"ends": [], "latest": "2026-10-31", "read": ["2026-10-20", "2026-10-31"]}
    assert p["wf"]["latest"] == "2026-11-30"
    old = plan([("wf", "2026-09-01")], [("wf", "2026-09-01"), ("wf", "2026-11-30")], 7, 28, retest_all=True)
    assert old["wf"]["latest"] == "2026-11-30" and old["wf"]["read"] == ["2026-09-01", "2026-11-30"]


IDENTS = st.frozensets(st.tuples(st.sampled_from(["1", "2", "3"]), st.integers(1, 2)), max_size=4)


@settings(max_examples=60, deadline=None)
@given(st.lists(IDENTS, max_size=12))
def test_identity_combiner_plans_agree(sets: list[frozenset[tuple[str, int]]]) -> None:
    assert assert_combiner_equivalent(IdentsCombineFn(), sets) == frozenset().union(*sets)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(DATED, max_size=6), max_size=8))
def test_partial_series_merge_into_the_series_of_all(batches: list[list[tuple[str, Observation]]]) -> None:
    # Partial series (a bundle's batch, a stored partition's) merge into the series of all,
    # day by day, in any order (what SeriesRows does with the partials a series gets).
    partials = [assert_combiner_equivalent(SeriesCombineFn(), b) for b in batches]
    whole = assert_combiner_equivalent(SeriesCombineFn(), [o for b in batches for o in b])
    for order in (partials, partials[::-1]):
        days: dict[str, list[CellAcc]] = {}
        for part in order:
            for date, acc in pickle.loads(pickle.dumps(part)).days.items():
                days.setdefault(date, []).append(acc)
        assert {d: merged(accs).compact() for d, accs in days.items()} == whole.days


RUN = st.fixed_dictionaries({
    "grader_id": st.sampled_from(["g", "h"]), "value": st.one_of(st.none(), st.floats(0, 1)),
    "status": st.sampled_from(["pass", "fail", "unavailable"]), "passed": st.one_of(st.none(), st.booleans())})


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(RUN, max_size=3), st.one_of(st.none(), st.sampled_from(["wf", "wf#1", "wf#2"])),
                          st.one_of(st.none(), st.booleans())), max_size=6))
def test_run_observations_are_the_partitions_split_by_run(
        runs: list[tuple[list[dict[str, Any]], str | None, bool | None]]) -> None:
    """Observations made per run, where it is graded, are the partition's (joined on the task
    over all its rows), so combining them per run gives the cells the whole partition gives."""
    results, verdicts = [], []
    for i, (rows, task, delivered) in enumerate(runs):
        results += [{**r, "workflow": "wf", "date": "2026-11-01", "run_id": str(i), "attempt": 1} for r in rows]
        if task is not None:
            verdicts.append({"workflow": "wf", "date": "2026-11-01", "run_id": str(i), "attempt": 1, "task": task,
                             "delivered": delivered})
    whole: dict[str, CellAcc] = {}
    for grader, obs in partition_observations("wf", results, verdicts):
        whole.setdefault(grader, CellAcc()).add(obs)
    split: dict[str, CellAcc] = {}
    for (part, idents, observations) in _runs(results, verdicts):
        assert part == ("wf", "2026-11-01") and len(idents) == 1
        for grader, obs in observations:
            split.setdefault(grader, CellAcc()).add(obs)
    assert {g: a.compact() for g, a in split.items()} == {g: a.compact() for g, a in whole.items()}


def test_fleet_stats_replaces_regraded_and_dropped_runs_of_a_stored_partition(tmp_path: Path) -> None:
    """Stored runs 0–5; this job regrades run 1, drops run 2 and adds run 6: the cell is the
    stored survivors (0, 3, 4, 5) plus the new runs (1, 6), as computed from those rows directly."""
    day = "2026-11-01"
    stored = [_result(i, day, i / 10) for i in range(6)]
    stored_verdicts = [_verdict(i, day, f"wf#{i % 3}") for i in range(6)]
    for table, rows in (("grader_results", stored), ("trace_verdicts", stored_verdicts)):
        path = tmp_path / partition_file(table, "wf", day)
        path.parent.mkdir(parents=True)
        path.write_bytes(encode_table(table, rows, "wf"))
    new = [_result(1, day, 0.9), _result(6, day, 0.7)]
    new_verdicts = [_verdict(1, day, "wf#1"), _verdict(6, day, "wf#0")]
    drops = [(t, "wf", day, ("2", 1)) for t in ("grader_results", "trace_verdicts", "runs")]
    kept = [r for r in stored if r["run_id"] not in ("1", "2")] + new
    kept_verdicts = [v for v in stored_verdicts if v["run_id"] not in ("1", "2")] + new_verdicts
    cells: dict[str, CellAcc] = {}
    for grader, obs in partition_observations("wf", kept, kept_verdicts):
        cells.setdefault(grader, CellAcc()).add(obs)
    expected = [row for g, acc in cells.items() for row in stats_rows("wf", g, {day: acc.compact()}, [day])]
    with local_test_pipeline() as p:
        out = {
            "observations": p | "R" >> beam.Create(_runs(new, new_verdicts)),
            "drops": p | "D" >> beam.Create(drops),
        } | FleetStats(str(tmp_path))
        rows = out["grader_stats"] | beam.Map(lambda r: {k: v for k, v in r.items() if k != "fleetgrade_version"})
        assert_that(rows, equal_to(expected), label="stats")
        ns = out["grader_stats"] | beam.Map(lambda r: (r["grader_id"], r["window_days"], r["n"]))
        assert_that(ns, equal_to([(g, w, 6) for g in ("g", DELIVERED) for w in (1, 7, 28)]), label="n")


def test_plan_leaves_out_dates_the_statistics_cannot_take() -> None:
    """A date whose windows would leave datetime's range (graders/stats/bounds.py) is never
    planned, whether this job touched it or it is stored."""
    p = plan([("wf", "0001-01-01"), ("wf", "2026-11-01"), ("old", "9999-12-31")],
             [("wf", "9999-12-31"), ("wf", "2026-10-30")], window=7, baseline=28)
    assert set(p) == {"wf"}
    assert p["wf"]["ends"] == ["2026-11-01"] and p["wf"]["latest"] == "2026-11-01"
    assert p["wf"]["read"] == ["2026-10-30", "2026-11-01"]


def test_a_run_the_statistics_cannot_take_is_warned_and_left_out() -> None:
    from graders.stats.cells import stats_warnings

    old = [_result(1, "0001-01-01", 0.5)]
    assert run_observations(old, []) == []
    assert stats_warnings("0001-01-01", old) == [
        "statistics: date '0001-01-01' is outside 0100-01-01 … 9999-11-30, the dates the statistics' windows span;"
        " the run is left out of grader_stats and regressions"]
    huge = [_result(2, "2026-11-01", 1.7e308), {**_result(2, "2026-11-01", 0.5), "grader_id": "h"}]
    assert stats_warnings("2026-11-01", huge) == [
        "statistics: g: value 1.7e+308 is beyond ±1e+100, the range the statistics compute in;"
        " left out of grader_stats and regressions"]
    cells: dict[str, CellAcc] = {}
    for (_, _, observations) in run_observations(huge, []):
        for grader, obs in observations:
            cells.setdefault(grader, CellAcc()).add(obs)
    assert (cells["g"].n, cells["g"].unavailable, cells["h"].n) == (0, 1, 1)


def test_fleet_stats_takes_drops_and_stored_partitions_of_any_date(tmp_path: Path) -> None:
    """Defence in depth: a stored partition or a drop dated outside the windows' range (from an
    older version, or a runmeta that admits it) is left out, never an exception in the job."""
    for table, rows in (("grader_results", [_result(1, "0001-01-01", 0.5)]),
                        ("trace_verdicts", [_verdict(1, "0001-01-01", "wf#1")])):
        path = tmp_path / partition_file(table, "wf", "0001-01-01")
        path.parent.mkdir(parents=True)
        path.write_bytes(encode_table(table, rows, "wf"))
    results = [_result(i, "2026-11-01", i / 10) for i in range(6)]
    verdicts = [_verdict(i, "2026-11-01", f"wf#{i % 3}") for i in range(6)]
    with local_test_pipeline() as p:
        out = {
            "observations": p | "R" >> beam.Create(_runs(results, verdicts)),
            "drops": p | "D" >> beam.Create([("grader_results", "wf", "0001-01-01", ("1", 1)),
                                             ("grader_results", "wf", "9999-12-31", ("2", 1))]),
        } | FleetStats(str(tmp_path))
        assert_that(out["grader_stats"] | beam.Map(lambda r: (r["date"], r["grader_id"], r["window_days"], r["n"])),
                    equal_to([("2026-11-01", g, w, 6) for g in ("g", DELIVERED) for w in (1, 7, 28)]))
