"""The operational-value executor inside the grading engine (results as gh-aw writes them)."""

from __future__ import annotations

import dataclasses
import hashlib

import orjson
import pytest

from graders.families.opvalue.executor import OperationalValueExecutor, entry_from_archive
from graders.families.opvalue.freeze import load_run_archive
from graders.families.opvalue.request import RunSubject
from graders.grading.engine import grade_one
from graders.grading.plan import PlanEntry
from graders.grading.registry import GraderContext
from graders.runs.runfiles import memory_run_files
from tests.graders.opvalue.conftest import evaluator

SUBJECT = RunSubject(run_id="4242", attempt=1, repository="octo/repo", workflow="Daily")
TRACE = {"artifacts": [{"type": "create_issue"}, {"type": "add_comment"}]}


def entry(body: str, digest: str | None = None, **kw) -> PlanEntry:
    content = evaluator(body)
    return PlanEntry(
        id="operational-value", name="Operational Value", source="operational-value",
        direction="higher_is_better", digest=hashlib.sha256(content).hexdigest() if digest is None else digest,
        run=".github/graders/v.sh", evaluator=content, **kw,
    )


def grade(e: PlanEntry, executor: OperationalValueExecutor) -> dict:
    return grade_one(e, TRACE, GraderContext(config=e.config or {}, grader_count=1), {"operational-value": executor})


@pytest.fixture
def executor(sandbox) -> OperationalValueExecutor:
    return OperationalValueExecutor(options=sandbox).for_run(SUBJECT)


def test_several_metrics_pass_with_threshold(executor):
    body = """req=$(cat)
jq -c '[{id: "outputs", value: (.outputs | length)}, {id: "run", value: (.run.id | tonumber)},
        {id: "limit", value: .config.limit}]' <<<"$req\""""
    result = grade(entry(body, threshold=2, config={"limit": 7}), executor)
    assert result["status"] == "pass" and result["passed"] is True
    assert result["value"] == 2
    assert result["metrics"] == [{"id": "outputs", "value": 2}, {"id": "run", "value": 4242},
                                 {"id": "limit", "value": 7}]
    assert result["diagnostics"] == {"run": 4242, "limit": 7}
    assert result["implementation"]["digest"] == entry(body).digest
    assert result["source"] == "operational-value"


def test_below_threshold_fails(executor):
    result = grade(entry("""echo '[{"id":"v","value":0.1}]'""", threshold=0.5), executor)
    assert result["status"] == "fail" and result["passed"] is False


def test_null_evidence_is_unavailable_and_keeps_metrics(executor):
    result = grade(entry("""echo '[{"id":"v","value":null},{"id":"n","value":0}]'"""), executor)
    assert result["status"] == "unavailable" and result["value"] is None
    assert result["message"] == "grader returned no value"
    assert result["metrics"] == [{"id": "v", "value": None}, {"id": "n", "value": 0}]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("echo '[]'", "operational-value evaluator output must be a non-empty array"),
        ("true", "operational-value evaluator output must be a non-empty array"),
        ("""echo '[{"id":"a"}]'""", "operational-value evaluator metrics must contain exactly id and value"),
        ("""echo '[{"id":"a","value":1},{"id":"a","value":2}]'""",
         "operational-value evaluator metric ids must be non-empty and unique"),
        ("""echo '[{"id":"a","value":"1"}]'""", "operational-value evaluator metric values must be null or finite numbers"),
        ("echo nope >&2; exit 2", "nope"),
        ("exit 3", "operational-value evaluator exited with status 3"),
    ],
)
def test_bad_outputs_become_runtime_errors(executor, body, message):
    result = grade(entry(body), executor)
    assert result["status"] == "error"
    assert result["error"] == f"grader operational-value runtime error: {message}"
    assert result["message"] == "grader returned null/undefined"  # the reference's artefact (§14.8)


def test_timeout_is_a_runtime_error(executor):
    fast = dataclasses.replace(executor, options=dataclasses.replace(executor.options, evaluator_timeout_ms=300))
    result = grade(entry("sleep 30"), fast)
    assert result["error"] == "grader operational-value runtime error: operational-value evaluator timed out after 300ms"


def test_digest_mismatch_never_runs_the_evaluator(executor, tmp_path):
    marker = tmp_path / "ran"
    tampered = dataclasses.replace(entry("true"), evaluator=evaluator(f"touch '{marker}'"))
    result = grade(tampered, executor)
    actual = hashlib.sha256(tampered.evaluator).hexdigest()
    assert result["status"] == "error"
    assert result["error"] == (
        "grader operational-value runtime error: operational-value evaluator digest mismatch: "
        f"expected {tampered.digest}, got {actual}"
    )
    assert not marker.exists()


def test_missing_evaluator_and_missing_digest(executor):
    missing = dataclasses.replace(entry("true"), evaluator=b"")
    assert grade(missing, executor)["error"] == (
        "grader operational-value runtime error: operational-value evaluator is missing from the execution specification"
    )
    nodigest = entry("true", digest="")
    assert "digest mismatch: expected none, got " in grade(nodigest, executor)["error"]


def test_without_a_run_subject(sandbox):
    result = grade(entry("""echo '[{"id":"v","value":1}]'"""), OperationalValueExecutor(options=sandbox))
    assert result["error"] == "grader operational-value runtime error: GITHUB_RUN_ID must identify the workflow run"


def test_grading_a_run_with_its_own_archive(executor):
    content = evaluator("""echo '[{"id":"v","value":0.9}]'""")
    digest = hashlib.sha256(content).hexdigest()
    manifest = {"version": 1, "graders": [{"id": "operational-value", "name": "Value", "source": "operational-value",
                                           "enabled": True, "unit": "ratio", "direction": "higher_is_better",
                                           "threshold": 0.8, "digest": digest, "run": "v.sh", "config": {"k": 1}}]}
    files = memory_run_files({"agent/graders/grader_manifest.json": orjson.dumps(manifest),
                              "agent/graders/operational_value_evaluator.sh": content})
    e = entry_from_archive(load_run_archive(files))
    assert (e.name, e.unit, e.threshold, e.config, e.digest) == ("Value", "ratio", 0.8, {"k": 1}, digest)
    result = grade(e, executor)
    assert result["status"] == "pass" and result["value"] == 0.9 and result["unit"] == "ratio"
