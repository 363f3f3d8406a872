"""`fleetgrade run --graders-dir`: a workflow .md's graders map decides that workflow's rows."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from graders.families.observed import observed_plan
from graders.grading.config import load_graders
from pipeline.cli import main
from pipeline.tables import connect
from tests.conftest import REPO

FLEET = REPO / "examples" / "fleet"
WORKFLOW_MD = REPO / "examples" / "graders" / "issue-triage.md"


@pytest.fixture(scope="module")
def output(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cfg") / "out"
    assert main(["run", "--input", str(FLEET), "--output", str(out), "--log-level", "WARNING",
                 "--graders-dir", str(WORKFLOW_MD.parent)]) == 0
    return out


def test_configured_workflow_gets_exactly_its_graders(output):
    con = connect(str(output))
    rows = con.execute(
        "SELECT DISTINCT grader_id, grader_index, source, implementation_digest, config_digest FROM grader_results "
        "WHERE workflow = 'issue-triage' AND source <> 'fleetgrade' ORDER BY grader_index").fetchall()
    plan = load_graders(WORKFLOW_MD)
    assert [r[0] for r in rows] == [e.id for e in plan.enabled]
    # The observed graders come after the plan's, whatever the plan (docs/observed-graders.md).
    observed = con.execute("SELECT DISTINCT grader_id, grader_index FROM grader_results WHERE workflow = 'issue-triage' "
                           "AND source = 'fleetgrade' ORDER BY grader_index").fetchall()
    assert observed == [(e.id, len(plan.enabled) + i) for i, e in enumerate(observed_plan().enabled)]
    assert "loops" not in [r[0] for r in rows]  # `enabled: false`
    assert {r[4] for r in rows} == {plan.digest()}
    inline = {r[0]: (r[2], r[3]) for r in rows if r[2] == "inline"}
    script = next(e.script for e in plan.entries if e.id == "bash-calls")
    assert inline["bash-calls"] == ("inline", hashlib.sha256(script.strip().encode()).hexdigest())
    assert set(inline) == {"bash-calls", "label-rate"}
    # Other workflows keep the default plan.
    other = con.execute("SELECT count(DISTINCT grader_id) FROM grader_results WHERE workflow = 'ci-doctor' "
                        "AND source <> 'fleetgrade'").fetchone()
    assert other[0] == 32


def test_inline_values_follow_the_trace(output):
    con = connect(str(output))
    rows = con.execute(
        "SELECT g.value, g.status, g.threshold, r.tool_calls FROM grader_results g JOIN runs r USING (workflow, run_id, attempt) "
        "WHERE g.grader_id = 'bash-calls'").fetchall()
    assert rows and all(v is not None and 0 <= v <= tc for v, _, _, tc in rows)
    assert all((s == "pass") == (v <= 4) for v, s, _, _ in rows)
    label = con.execute("SELECT DISTINCT status, message FROM grader_results WHERE grader_id = 'label-rate'").fetchall()
    assert ("unavailable", "not applicable: no safe outputs") in label or all(s == "pass" for s, _ in label)


def test_bad_configuration_fails_before_any_work(tmp_path, capsys):
    bad = tmp_path / "graders.yaml"
    bad.write_text("graders:\n  Bad_Id: {}\n")
    out = tmp_path / "out"
    assert main(["run", "--input", str(FLEET), "--output", str(out), "--graders", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and 'graders has invalid id "Bad_Id"' in err
    assert not out.exists()


def test_a_graders_file_named_after_no_workflow_is_said(output, tmp_path, capsys):
    # A misspelt file name would otherwise leave its workflow on the default plan without a word.
    graders = tmp_path / "graders"
    graders.mkdir()
    (graders / "issue-triage.md").write_bytes(WORKFLOW_MD.read_bytes())
    (graders / "isue-triage.md").write_bytes(WORKFLOW_MD.read_bytes())
    capsys.readouterr()
    assert main(["run", "--input", str(FLEET), "--output", str(output), "--log-level", "WARNING",
                 "--graders-dir", str(graders)]) == 0
    err = capsys.readouterr().err
    warned = [line for line in err.splitlines() if "isue-triage.md" in line]
    assert len(warned) == 1 and warned[0].endswith(
        f"no run of workflow 'isue-triage' in {output}, so its graders were not used; did you mean issue-triage?")
    assert "issue-triage.md:" not in err
