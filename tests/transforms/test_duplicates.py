"""Fleet identity: one folder per (workflow, run id, attempt); --input at a run folder is that run."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import apache_beam as beam
import pyarrow.parquet as pq
from apache_beam.testing.util import assert_that, equal_to

from tests.conftest import REPO
from tests.helpers.beam import local_test_pipeline
from transforms.discover import DiscoverRuns, ListRuns, hint_path, list_run
from transforms.duplicates import STAGE, ResolveDuplicates, content_digest, run_identity
from transforms.prepare import DEAD, DEAD_STATE

FLEET = REPO / "examples" / "fleet"
RUN = FLEET / "ci-doctor" / "run-7100403"  # aw_info.json: ci-doctor, 7100403, attempt 1
OTHER = FLEET / "ci-doctor" / "run-7100435"
FLEETGRADE = Path(sys.executable).parent / "fleetgrade"


def _fleet(tmp_path: Path) -> Path:
    """Same identity twice byte for byte, another twice with one file changed, one alone."""
    fleet = tmp_path / "fleet"
    shutil.copytree(RUN, fleet / "ci-doctor" / "run-7100403")
    shutil.copytree(RUN, fleet / "downloads-a" / "run-7100403")  # an identical second download
    shutil.copytree(OTHER, fleet / "ci-doctor" / "run-7100435")
    shutil.copytree(OTHER, fleet / "downloads-b" / "run-7100435")
    (fleet / "downloads-b" / "run-7100435" / "agent_output.json").write_text("{}")
    shutil.copytree(FLEET / "ci-doctor" / "run-7100470", fleet / "ci-doctor" / "run-7100470")
    return fleet


def test_identity_and_content_digest(tmp_path: Path) -> None:
    fleet = _fleet(tmp_path)
    base = str(fleet)
    assert run_identity(base, "downloads-a/run-7100403") == (("ci-doctor", "7100403", 1), "2026-11-28")
    assert content_digest(base, "ci-doctor/run-7100403") == content_digest(base, "downloads-a/run-7100403")
    assert content_digest(base, "ci-doctor/run-7100435") != content_digest(base, "downloads-b/run-7100435")
    (fleet / "anon" / "x").mkdir(parents=True)
    (fleet / "anon" / "x" / "agent_output.json").write_text("{}")
    assert run_identity(base, "anon/x") is None  # no date: left to preparation to dead-letter


def test_identical_copies_are_graded_once_and_differing_ones_not_at_all(tmp_path: Path) -> None:
    fleet = _fleet(tmp_path)
    base = str(fleet)
    roots = ["ci-doctor/run-7100403", "downloads-a/run-7100403", "ci-doctor/run-7100435",
             "downloads-b/run-7100435", "ci-doctor/run-7100470"]
    previous = {"root": f"{base}/downloads-a/run-7100403", "outcome": "graded"}
    todo = [(r, b"\0" * 8, previous if r.startswith("downloads-a") else None, []) for r in roots]

    def dead(row: dict[str, Any]) -> tuple[str, str, str, str | None, str | None]:
        named = [r for r in roots if f"{base}/{r}" in row["message"]]
        return row["input"].removeprefix(base + "/"), row["stage"], row["error_class"], row["workflow"], \
            ",".join(named)

    with local_test_pipeline() as p:
        out = (p | "Runs" >> beam.Create(todo), p | "Kept" >> beam.Create([])) | ResolveDuplicates(base)
        assert_that(out["runs"] | "Roots" >> beam.Map(lambda run: run[0]),
                    equal_to(["ci-doctor/run-7100403", "ci-doctor/run-7100470"]), label="graded")
        assert_that(out[DEAD] | "Dead" >> beam.Map(dead), equal_to([
            ("downloads-a/run-7100403", STAGE, "DuplicateRun", "ci-doctor",
             "ci-doctor/run-7100403,downloads-a/run-7100403"),
            ("ci-doctor/run-7100435", STAGE, "ConflictingRuns", "ci-doctor",
             "ci-doctor/run-7100435,downloads-b/run-7100435"),
            ("downloads-b/run-7100435", STAGE, "ConflictingRuns", "ci-doctor",
             "ci-doctor/run-7100435,downloads-b/run-7100435"),
        ]), label="dead")
        # The copy's earlier state travels with its dead letter, so its earlier rows are dropped.
        assert_that(out[DEAD_STATE] | "Previous" >> beam.Map(lambda item: (item[0]["input"], item[2])),
                    equal_to([(f"{base}/downloads-a/run-7100403", previous),
                              (f"{base}/ci-doctor/run-7100435", None),
                              (f"{base}/downloads-b/run-7100435", None)]), label="state")


def _roots(base: Path) -> list[str]:
    return sorted(root for root, _ in ListRuns().process(str(base)))


def test_a_new_folder_meets_the_folders_earlier_jobs_graded(tmp_path: Path) -> None:
    fleet = _fleet(tmp_path)
    base = str(fleet)

    def kept(root: str, run_id: str) -> dict[str, Any]:
        return {"root": f"{base}/{root}", "outcome": "graded", "workflow": "ci-doctor", "run_id": run_id,
                "attempt": 1, "date": "2026-11-28"}

    states = [kept("ci-doctor/run-7100403", "7100403"),  # unchanged; a byte-identical copy is new
              kept("ci-doctor/run-7100435", "7100435"),  # unchanged; a different copy is new
              kept("moved-away/run-7100470", "7100470"),  # gone: its run was moved to a new folder
              {"root": f"{base}/x", "outcome": "dead", "workflow": None, "run_id": None, "attempt": None}]
    todo = [(r, b"\0" * 8, None, []) for r in ("downloads-a/run-7100403", "downloads-b/run-7100435",
                                           "ci-doctor/run-7100470")]
    with local_test_pipeline() as p:
        out = (p | "Runs" >> beam.Create(todo), p | "Kept" >> beam.Create(states)) | ResolveDuplicates(base)
        assert_that(out["runs"] | "Roots" >> beam.Map(lambda run: run[0]), equal_to(["ci-doctor/run-7100470"]),
                    label="graded")
        assert_that(out[DEAD] | "Dead" >> beam.Map(lambda r: (r["input"].removeprefix(base + "/"), r["error_class"],
                                                               f"{base}/ci-doctor/" in r["message"])),
                    equal_to([("downloads-a/run-7100403", "DuplicateRun", True),
                              ("downloads-b/run-7100435", "ConflictingRuns", True)]), label="dead")


def test_an_input_that_is_one_run_folder_is_that_run(tmp_path: Path) -> None:
    fleet = _fleet(tmp_path)
    assert _roots(fleet)[:2] == ["ci-doctor/run-7100403", "ci-doctor/run-7100435"]
    assert _roots(fleet / "ci-doctor") == ["run-7100403", "run-7100435", "run-7100470"]
    run = fleet / "ci-doctor" / "run-7100403"
    (run / "README.txt").write_text("notes")  # listed first; says nothing either way
    shutil.copytree(OTHER, run / "nested" / "run-9")  # a run folder inside: not this run's files
    assert _roots(run) == [""]
    listing = list_run(str(run), "")
    assert "README.txt" in [rel for rel, _, _ in listing] and not any(rel.startswith("nested/") for rel, _, _ in listing)
    assert {rel.split("/", 1)[0] for rel, _, _ in listing} >= {"aw_info.json", "mcp-logs", "sandbox"}
    with local_test_pipeline() as p:
        assert_that(p | DiscoverRuns(str(run)) | beam.Map(lambda kv: (kv[0], len(kv[1]))),
                    equal_to([("", len(listing))]))
    assert hint_path(str(run), "") == "fleet/ci-doctor/run-7100403"
    assert hint_path("gs://bucket/wf/2026-01-02/raw", "") == "wf/2026-01-02/raw"
    assert hint_path("gs://bucket/run-3", "") == "run-3"
    assert hint_path(str(fleet), "ci-doctor/run-1") == "ci-doctor/run-1"
    named_like_a_run = tmp_path / "run-2026"  # a fleet folder whose own name looks like a run's
    shutil.copytree(RUN, named_like_a_run / "wf" / "run-1")
    (named_like_a_run / "README.md").write_text("a fleet")
    assert _roots(named_like_a_run) == ["wf/run-1"]
    assert _roots(tmp_path / "missing") == []


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(FLEETGRADE), "run", *args, "--log-level", "ERROR"], capture_output=True, text=True,
                          cwd=cwd, timeout=300, check=False)


def _rows(out: Path, table: str) -> list[dict[str, Any]]:
    files = sorted((out / table).rglob("*.parquet"))
    return [row for f in files for row in pq.read_table(f, partitioning=None).to_pylist()]


def test_run_counts_a_duplicate_once_and_grades_a_run_folder_input(tmp_path: Path) -> None:
    fleet = _fleet(tmp_path)
    out = tmp_path / "out"
    done = _run(["--input", str(fleet), "--output", str(out)], tmp_path)
    assert done.returncode == 0, done.stderr
    runs = _rows(out, "runs")
    assert sorted(r["root"].removeprefix(f"{fleet}/") for r in runs) == ["ci-doctor/run-7100403",
                                                                          "ci-doctor/run-7100470"]
    assert {r["graders"] for r in runs} == {runs[0]["graders"]}  # one folder's graders each
    dead = _rows(out, "dead_letter")
    assert sorted((d["input"].removeprefix(f"{fleet}/"), d["stage"], d["error_class"]) for d in dead) == [
        ("ci-doctor/run-7100435", "duplicate", "ConflictingRuns"),
        ("downloads-a/run-7100403", "duplicate", "DuplicateRun"),
        ("downloads-b/run-7100435", "duplicate", "ConflictingRuns"),
    ]
    assert len(runs) + len(dead) == 5  # every folder is a runs or a dead_letter row
    assert sum(r["n"] for r in _rows(out, "task_reliability")) == len(runs)

    # An incremental job: a third copy, new, is a duplicate of the run graded before; the
    # earlier grades stay, and task_reliability counts the run once.
    shutil.copytree(RUN, fleet / "downloads-c" / "run-7100403")
    done = _run(["--input", str(fleet), "--output", str(out)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(r["root"] for r in _rows(out, "runs")) == sorted(r["root"] for r in runs)
    dead = {d["input"].removeprefix(f"{fleet}/"): d for d in _rows(out, "dead_letter")}
    assert dead["downloads-c/run-7100403"]["error_class"] == "DuplicateRun"
    assert f"graded once, from {fleet}/ci-doctor/run-7100403" in dead["downloads-c/run-7100403"]["message"]
    assert len(dead) == 4
    assert sum(r["n"] for r in _rows(out, "task_reliability")) == len(runs)  # a trial per run, no rerun

    # --input at one run folder: that run, none of its subfolders as runs.
    one = tmp_path / "one"
    run_dir = tmp_path / "solo" / "ci-doctor" / "2026-03-01" / "run-55"
    shutil.copytree(fleet / "ci-doctor" / "run-7100470", run_dir)
    (run_dir / "aw_info.json").unlink()  # identity from the input's own path
    done = _run(["--input", str(run_dir) + "/", "--output", str(one)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert [(r["root"], r["run_id"]) for r in _rows(one, "runs")] == [(str(run_dir), "55")]
    assert (one / "runs" / "workflow=ci-doctor" / "date=2026-03-01").is_dir()
    assert _rows(one, "dead_letter") == []
