"""`fleetgrade grade`, `preprocess` and `sql`: gh-aw's files, contracts, and clear errors."""

from __future__ import annotations

import json
import shutil

from graders.plan import default_plan
from pipeline.cli import main
from schemas.documents import GraderResultsFile, Manifest, PreprocessedTrace
from tests.conformance.ghaw_cases import CASES_DIR
from tests.conftest import REPO

RUN = sorted((REPO / "examples" / "fleet" / "ci-doctor").glob("run-*"))[0]


def test_grade_writes_the_three_gh_aw_files(tmp_path):
    assert main(["grade", str(RUN), "--out", str(tmp_path)]) == 0
    manifest = Manifest.model_validate_json((tmp_path / "grader_manifest.json").read_text())
    assert [g.id for g in manifest.graders] == [e.id for e in default_plan().entries]
    PreprocessedTrace.model_validate_json((tmp_path / "grader_payload.json").read_text())
    results = GraderResultsFile.model_validate_json((tmp_path / "grader_results.json").read_text())
    assert results.run.id == RUN.name.removeprefix("run-") and results.run.graderCount == len(results.results)
    assert (tmp_path / "grader_results.json").read_text().startswith('{\n  "version": 1,\n  "run": {\n')


def test_grade_default_out_is_the_runs_graders_folder(tmp_path):
    run = tmp_path / "run-1"
    shutil.copytree(RUN, run)
    assert main(["grade", str(run)]) == 0
    assert sorted(p.name for p in (run / "agent" / "graders").iterdir()) == [
        "grader_manifest.json", "grader_payload.json", "grader_results.json"]


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
    assert main(["grade", "--trace", str(bad), "--json"]) == 1
    assert f"{bad}: not valid JSON" in capsys.readouterr().err
    assert main(["grade", "--trace", str(tmp_path / "missing.json"), "--json"]) == 1
    assert "missing.json: cannot read" in capsys.readouterr().err
    empty = tmp_path / "run-5"
    empty.mkdir()
    (empty / "notes.txt").write_text("x")
    assert main(["preprocess", str(empty)]) == 1
    assert "no gh-aw run artifacts" in capsys.readouterr().err
    assert main(["sql", str(tmp_path), "SELECT 1"]) == 1
    assert "no fleetgrade tables found" in capsys.readouterr().err


def test_sql_formats(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", "--input", str(REPO / "examples" / "fleet"), "--output", str(out), "--log-level", "ERROR"]) == 0
    assert main(["sql", str(out), "SELECT count(*) AS n FROM dead_letter", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": 4}]
    assert main(["sql", str(out), "SELECT workflow FROM runs GROUP BY 1 ORDER BY 1", "--format", "csv"]) == 0
    assert capsys.readouterr().out.split() == ["workflow", "ci-doctor", "daily-file-diet", "issue-triage"]
    assert main(["sql", str(out), "SELECT nope FROM runs"]) == 1
