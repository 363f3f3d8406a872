"""`fleetgrade grade`, `preprocess` and `sql`: gh-aw's files, contracts, and clear errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from graders.grading.plan import default_plan
from pipeline.cli import main
from schemas.documents import GraderResultsFile, Manifest, PreprocessedTrace
from tests.conformance.ghaw_cases import CASES_DIR, deep_equal, result_disagreements
from tests.conftest import REPO

FLEETGRADE = Path(sys.executable).parent / "fleetgrade"  # the installed executable
RUN = sorted((REPO / "examples" / "fleet" / "ci-doctor").glob("run-*"))[0]


def test_grade_writes_the_three_gh_aw_files(tmp_path):
    assert main(["grade", str(RUN), "--out", str(tmp_path)]) == 0
    manifest = Manifest.model_validate_json((tmp_path / "grader_manifest.json").read_text())
    assert [g.id for g in manifest.graders] == [e.id for e in default_plan().entries]
    PreprocessedTrace.model_validate_json((tmp_path / "grader_payload.json").read_text())
    results = GraderResultsFile.model_validate_json((tmp_path / "grader_results.json").read_text())
    assert results.run.id == RUN.name.removeprefix("run-") and results.run.graderCount == len(results.results)
    assert (tmp_path / "grader_results.json").read_text().startswith('{\n  "version": 1,\n  "run": {\n')


def _listing(folder):
    return sorted((str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*"))


def test_grade_without_out_prints_and_never_writes_into_the_run(tmp_path):
    run = tmp_path / "run-1"
    shutil.copytree(RUN, run)
    before = _listing(tmp_path)
    done = subprocess.run([str(FLEETGRADE), "grade", str(run)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    doc = GraderResultsFile.model_validate_json(done.stdout)
    assert doc.run.graderCount == len(default_plan().entries)
    assert _listing(tmp_path) == before  # nothing written, in the run or beside it


def test_grade_refuses_out_inside_the_run_folder(tmp_path, capsys):
    run = tmp_path / "wf" / "run-1"
    shutil.copytree(RUN, run)
    before = _listing(run)
    for out in (run, run / "agent" / "graders", run / "new"):
        assert main(["grade", str(run), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err == f"fleetgrade grade: --out is inside the input run folder; write the files elsewhere ({out})\n"
    assert _listing(run) == before
    assert main(["grade", str(run), "--out", str(tmp_path / "wf" / "graded")]) == 0  # beside it is fine


def test_grade_a_bare_artifact_folder_reads_identity_from_its_whole_path(tmp_path, capsys):
    run = tmp_path / "ci-doctor" / "2026-03-02" / "run-4242"
    shutil.copytree(RUN, run)
    (run / "aw_info.json").unlink()
    assert main(["grade", str(run)]) == 0
    assert json.loads(capsys.readouterr().out)["run"]["id"] == "4242"
    from graders.runs.runfiles import local_run_files
    from graders.single_run import single_run_meta

    meta = single_run_meta(local_run_files(run), str(run))
    assert (meta.workflow, meta.run_id, meta.date, meta.metadata_source) == ("ci-doctor", "4242", "2026-03-02", "layout")
    anon = tmp_path / "download" / "artifacts"  # a folder name that says nothing: no identity, still graded
    shutil.copytree(run, anon)
    meta = single_run_meta(local_run_files(anon), str(anon))
    assert (meta.workflow, meta.run_id, meta.date) == ("", "", "")
    assert main(["preprocess", str(anon)]) == 0
    PreprocessedTrace.model_validate_json(capsys.readouterr().out)


@pytest.mark.parametrize("path,hints", [
    ("/x/ci-doctor/run-17", ("ci-doctor", "17", None)),
    ("/x/ci-doctor/date=2026-01-05/run-17", ("ci-doctor", "17", "2026-01-05")),
    ("/x/ci-doctor/123456", ("ci-doctor", "123456", None)),
    ("/x/case-0001-raw-x/raw", (None, None, None)),
    ("/2026-01-05/raw", (None, None, "2026-01-05")),
    ("run-9", (None, "9", None)),
])
def test_path_hints(path, hints):
    from graders.single_run import path_hints

    assert path_hints(path) == hints


def test_grade_a_conformance_raw_folder_as_the_reference_does(capsys):
    case = CASES_DIR / "case-0007-raw-retries-and-errors"
    before = _listing(case)
    assert main(["grade", str(case / "raw")]) == 0
    doc = json.loads(capsys.readouterr().out)
    expected = json.loads((case / "expected.json").read_text())["results"]
    assert [r["id"] for r in doc["results"]] == [r["id"] for r in expected]
    for got, want in zip(doc["results"], expected, strict=True):
        assert result_disagreements(got, want) == [], got["id"]
    assert doc["run"]["id"] == ""
    assert main(["preprocess", str(case / "raw")]) == 0
    assert deep_equal(json.loads(capsys.readouterr().out), json.loads((case / "expected.json").read_text())["trace"])
    assert _listing(case) == before


def test_a_workflow_or_fleet_folder_is_refused_in_one_line(capsys):
    workflow = RUN.parent
    assert main(["grade", str(workflow)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fleetgrade grade: this is a workflow folder (") and err.count("\n") == 1
    assert err.rstrip().endswith(f"pass one of its run folders ({workflow})")
    assert main(["preprocess", str(workflow.parent)]) == 2
    err = capsys.readouterr().err
    assert "pass one run folder, or grade them all with `fleetgrade run --input`" in err and err.count("\n") == 1


def test_grade_json_and_trace_input_agree(tmp_path, capsys):
    assert main(["grade", str(RUN), "--json"]) == 0
    from_run = json.loads(capsys.readouterr().out)
    assert main(["preprocess", str(RUN)]) == 0
    trace_file = tmp_path / "trace.json"
    trace_file.write_text(capsys.readouterr().out)
    assert main(["grade", "--trace", str(trace_file), "--json"]) == 0
    from_trace = json.loads(capsys.readouterr().out)
    assert from_trace["results"] == from_run["results"]
    assert from_trace["run"]["id"] == ""  # no run identity in a bare trace, as gh-aw


def test_grade_conformance_trace_case(capsys):
    case = CASES_DIR / "case-0071-trace-tool-wise-score-basic"
    assert main(["grade", "--trace", str(case / "trace.json"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    expected = {r["id"]: r for r in json.loads((case / "expected.json").read_text())["results"]}
    for r in doc["results"]:
        assert r == expected[r["id"]] | ({"details": r["details"]} if "details" in r else {})


def test_errors_name_the_file_and_exit_non_zero(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    assert main(["grade", "--trace", str(bad), "--json"]) == 2  # an input mistake
    err = capsys.readouterr().err
    assert err.startswith("fleetgrade grade: not valid JSON: ") and err.endswith(f" ({bad})\n")
    assert main(["grade", "--trace", str(tmp_path / "missing.json"), "--json"]) == 2
    assert capsys.readouterr().err == f"fleetgrade grade: cannot read: No such file or directory ({tmp_path / 'missing.json'})\n"
    empty = tmp_path / "run-5"
    empty.mkdir()
    (empty / "notes.txt").write_text("x")
    assert main(["preprocess", str(empty)]) == 2
    assert "no gh-aw run artifacts" in capsys.readouterr().err
    assert main(["sql", str(tmp_path), "SELECT 1"]) == 2
    assert "no fleetgrade tables found" in capsys.readouterr().err


def test_sql_formats(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", "--input", str(REPO / "examples" / "fleet"), "--output", str(out), "--log-level", "ERROR"]) == 0
    assert main(["sql", str(out), "SELECT count(*) AS n FROM dead_letter", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": 4}]
    assert main(["sql", str(out), "SELECT workflow FROM runs GROUP BY 1 ORDER BY 1", "--format", "csv"]) == 0
    assert capsys.readouterr().out.split() == ["workflow", "ci-doctor", "daily-file-diet", "issue-triage"]
    assert main(["sql", str(out), "SELECT nope FROM runs"]) == 2
