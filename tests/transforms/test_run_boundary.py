"""Everything about one run happens inside its error boundary (issue 28): whatever reading or
preparing it raises, the run is a dead letter naming it and the other runs are prepared."""

from __future__ import annotations

import json

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline as BeamPipeline
from apache_beam.testing.util import assert_that, equal_to

import graders.one_run as one_run
import transforms.prepare as prepare_module
from graders.prepare import prepare_run
from transforms.discover import DiscoverRuns
from transforms.prepare import DEAD, DEAD_STATE, PrepareRun

FAILURES = {"wf/run-2": RecursionError("maximum recursion depth exceeded"),
            "wf/run-3": MemoryError("no memory"),
            "wf/run-4": UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")}


def _fleet(tmp_path):
    for n in range(1, 6):
        run = tmp_path / "wf" / f"run-{n}"
        run.mkdir(parents=True)
        (run / "aw_info.json").write_text(json.dumps({"run_id": n, "created_at": "2026-05-01T00:00:00Z"}))
    return str(tmp_path)


def _failing_prepare(files, run_root):
    if run_root in FAILURES:
        raise FAILURES[run_root]
    return prepare_run(files, run_root)


def _failing_list(base, root_rel, store=None):
    raise OSError(f"{base}/{root_rel}: listing failed")


def test_whatever_a_run_raises_it_is_a_dead_letter_and_the_job_goes_on(tmp_path, monkeypatch):
    base = _fleet(tmp_path)
    monkeypatch.setattr(prepare_module, "prepare_run", _failing_prepare)
    with BeamPipeline() as p:
        out = (p | DiscoverRuns(base)
                 | beam.ParDo(PrepareRun(base)).with_outputs(DEAD, DEAD_STATE, main="prepared"))
        assert_that(out.prepared | "Roots" >> beam.Map(lambda prep: prep.meta.run_id),
                    equal_to(["1", "5"]), label="prepared")
        assert_that(out[DEAD] | "Dead" >> beam.Map(lambda r: (r["input"][len(base) + 1:], r["error_class"],
                                                               r["workflow"], r["run_id"])),
                    equal_to([("wf/run-2", "RecursionError", "wf", "2"), ("wf/run-3", "MemoryError", "wf", "3"),
                              ("wf/run-4", "UnicodeDecodeError", "wf", "4")]), label="dead")


def test_listing_a_run_again_is_inside_its_boundary(tmp_path, monkeypatch):
    """A run from the incremental decision is listed again by PrepareRun: a failure there is the
    run's dead letter too (it was outside the boundary)."""
    base = _fleet(tmp_path)
    monkeypatch.setattr(prepare_module, "list_run", _failing_list)
    with BeamPipeline() as p:
        out = (p | beam.Create([("wf/run-1", b"\0" * 8, None)])
                 | beam.ParDo(PrepareRun(base)).with_outputs(DEAD, DEAD_STATE, main="prepared"))
        assert_that(out.prepared, equal_to([]), label="prepared")
        assert_that(out[DEAD] | beam.Map(lambda r: (r["error_class"], r["message"])),
                    equal_to([("OSError", f"{base}/wf/run-1: listing failed")]), label="dead")


def test_a_run_the_trace_rules_fail_on_is_a_dead_letter_and_has_no_runs_row(tmp_path, monkeypatch):
    from graders.families.trace_rules.config import default_config
    from graders.grading.plan import PlanSet, default_plan
    from transforms.grade import Grade

    base = _fleet(tmp_path)
    real = one_run.verdict_row

    def failing(prep, cfg):
        if prep.meta.run_id == "2":
            raise RecursionError("maximum recursion depth exceeded")
        return real(prep, cfg)

    monkeypatch.setattr(one_run, "verdict_row", failing)
    with BeamPipeline() as p:
        prepared = p | DiscoverRuns(base) | beam.ParDo(PrepareRun(base)).with_outputs(DEAD, DEAD_STATE, main="runs")
        graded = prepared.runs | Grade(PlanSet(default_plan()), default_config())
        assert_that(graded["trace_verdicts"] | "V" >> beam.Map(lambda r: r["run_id"]), equal_to(["1", "3", "4", "5"]),
                    label="verdicts")
        assert_that(graded["dead_letter"] | "D" >> beam.Map(lambda r: (r["run_id"], r["stage"], r["error_class"])),
                    equal_to([("2", "grade", "RecursionError")]), label="dead")
        assert_that(graded["runs"] | "R" >> beam.Map(lambda r: (r["run_id"], r["attempt"])),
                    equal_to([("1", 1), ("3", 1), ("4", 1), ("5", 1)]), label="runs")


def test_a_run_over_its_reading_budget_is_a_dead_letter_beside_graded_runs(tmp_path, monkeypatch):
    """Too many files, or too many bytes read: the run is a dead letter naming its folder and
    the budget, whether it comes from discovery or is listed again (incremental); the runs
    beside it are prepared."""
    from graders.runs import runfiles

    base = _fleet(tmp_path)
    for n in range(6):
        (tmp_path / "wf" / "run-2" / f"extra-{n}.txt").write_text("x")
    (tmp_path / "wf" / "run-3" / "aw_info.json").write_text(
        json.dumps({"run_id": 3, "created_at": "2026-05-01T00:00:00Z"}) + " " * 2000)
    monkeypatch.setattr(runfiles, "MAX_RUN_FILES", 5)
    monkeypatch.setattr(runfiles, "MAX_RUN_BYTES", 1000)
    with BeamPipeline() as p:
        found = p | DiscoverRuns(base)
        again = p | "Again" >> beam.Create([("wf/run-2", b"\0" * 8, None)])
        runs = (found, again) | beam.Flatten()
        out = runs | beam.ParDo(PrepareRun(base)).with_outputs(DEAD, DEAD_STATE, main="prepared")
        assert_that(out.prepared | "Ids" >> beam.Map(lambda prep: prep.meta.run_id),
                    equal_to(["1", "4", "5"]), label="prepared")
        assert_that(out[DEAD] | "Dead" >> beam.Map(lambda r: (r["input"][len(base) + 1:], r["message"])),
                    equal_to([("wf/run-2", f"{base}/wf/run-2: run folder holds more than 5 files; not read")] * 2
                             + [("wf/run-3", f"{base}/wf/run-3: read more than 1000 bytes from the run folder "
                                 "(at aw_info.json); not graded")]), label="dead")


def test_discovery_holds_a_run_only_to_one_entry_past_its_file_budget(tmp_path, monkeypatch):
    from graders.runs import runfiles
    from transforms.discover import ListRuns, list_run
    from transforms.progress import Tally

    base = _fleet(tmp_path)
    for n in range(20):
        (tmp_path / "wf" / "run-2" / f"extra-{n:02}.txt").write_text("x")
    monkeypatch.setattr(runfiles, "MAX_RUN_FILES", 5)
    listed = dict(ListRuns().discover(base, Tally("discover")))
    assert {root: len(files) for root, files in listed.items()} == {
        "wf/run-1": 1, "wf/run-2": 6, "wf/run-3": 1, "wf/run-4": 1, "wf/run-5": 1}
    assert list_run(base, "wf/run-2") == listed["wf/run-2"]
    assert len(dict(ListRuns().discover(f"{base}/wf/run-2", Tally("discover")))[""]) == 6  # the input is the run
