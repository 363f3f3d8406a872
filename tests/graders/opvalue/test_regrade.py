"""The regrade core: digests checked twice, one observation row per evidence time."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import orjson
import pytest

from graders.families.opvalue.errors import OperationalValueError, SandboxUnavailableError
from graders.families.opvalue.regrade import RegradeRun, observation_key, regrade
from graders.families.opvalue.request import RunSubject
from graders.families.opvalue.sandbox import SandboxOptions
from graders.runs.runfiles import memory_run_files
from schemas.observation_table import OBSERVATION_SCHEMA, observations_table
from schemas.version import FLEETGRADE_VERSION
from tests.graders.opvalue.conftest import evaluator

# An attainment evaluator: the value depends on the evidence time it is asked about.
ATTAINMENT = r"""req=$(cat)
jq -c '{
  value: (if .evidenceAt >= "2026-08-30" then 0.8 else null end),
  case: .case, opportunityKey: ("run-" + .run.id),
  evidenceCutoff: ([.evidenceAt, "2026-08-30T00:00:00Z"] | min), maturesAt: "2026-08-30T00:00:00Z",
  provenance: (if .evidenceAt >= "2026-08-30" then [{repository: .run.repository, kind: "pull_request", ref: "#7"}] else [] end),
  message: ("created " + .run.createdAt)
}' <<<"$req"
"""
METRICS = """echo '[{"id":"merged","value":1},{"id":"opened","value":3}]'"""
SUBJECT = RunSubject(run_id="900", attempt=2, repository="octo/repo", workflow="Daily",
                     created_at="2026-08-01T10:00:00Z")


def archived_run(body: str, *, manifest_digest: str | None = None, result_digest: str | None = None,
                 evaluator_bytes: bytes | None = None, run_id: str = "900", baseline: float | None = None,
                 case: dict | None = None) -> RegradeRun:
    content = evaluator(body)
    digest = hashlib.sha256(content).hexdigest()
    manifest = {"version": 1, "graders": [{
        "id": "operational-value", "name": "Operational Value", "source": "operational-value", "enabled": True,
        "direction": "higher_is_better", "threshold": 0.5, "digest": manifest_digest or digest, "run": "v.sh"}]}
    original: dict = {"id": "operational-value", "name": "Operational Value", "value": None, "unit": "",
                      "passed": None, "status": "unavailable", "source": "operational-value",
                      "implementation": {"id": "gh-aw/graders", "version": 1, "digest": result_digest or digest}}
    if baseline is not None:
        original["baselineValue"] = baseline
    if case is not None:
        original["observation"] = {"case": case}
    results = {"version": 1, "run": {"id": run_id, "attempt": 2}, "context": {}, "results": [original]}
    files = memory_run_files({
        "agent/graders/grader_manifest.json": orjson.dumps(manifest),
        "agent/graders/operational_value_evaluator.sh": evaluator_bytes or content,
        "usage/graders/grader_results.json": orjson.dumps(results),
    })
    return RegradeRun(files=files, subject=SUBJECT, workflow="daily", date="2026-08-01")


def test_attainment_regrade_observations(sandbox):
    run = archived_run(ATTAINMENT, baseline=0.5, case={"issue": 12})
    early = regrade(run, "2026-08-29T12:00:00Z", sandbox)
    late = regrade(run, "2026-08-30T12:00:00.000Z", sandbox)
    digest = hashlib.sha256(evaluator(ATTAINMENT)).hexdigest()
    assert observation_key(late) == ("900", digest, datetime(2026, 8, 30, 12, tzinfo=UTC))
    assert early["status"] == "unavailable" and early["value"] is None and early["mature"] is False
    assert early["delta_from_baseline"] is None and early["message"] == "created 2026-08-01T10:00:00Z"
    assert late["status"] == "pass" and late["value"] == 0.8 and late["mature"] is True
    assert late["baseline_value"] == 0.5 and late["delta_from_baseline"] == pytest.approx(0.3)
    assert late["case"] == '{"issue":12}' and late["opportunity_key"] == "run-900"
    assert late["evidence_cutoff"] == late["matures_at"] == datetime(2026, 8, 30, tzinfo=UTC)
    assert orjson.loads(late["provenance"]) == [{"kind": "pull_request", "ref": "#7", "repository": "octo/repo"}]
    assert late["attempt"] == 2 and late["workflow"] == "daily" and late["fleetgrade_version"] == FLEETGRADE_VERSION
    table = observations_table([late, early])
    assert table.schema == OBSERVATION_SCHEMA and table.num_rows == 2
    assert table.column("evidence_at").to_pylist()[0] == datetime(2026, 8, 29, 12, tzinfo=UTC)


def test_metric_array_regrade(sandbox):
    row = regrade(archived_run(METRICS), "2026-08-30T12:00:00Z", sandbox)
    assert row["status"] == "pass" and row["value"] == 1.0
    assert row["metrics"] == [{"id": "merged", "value": 1.0}, {"id": "opened", "value": 3.0}]
    assert row["case"] is None and row["mature"] is None and row["provenance"] is None
    assert observations_table([row]).num_rows == 1


def test_evaluator_failure_is_an_error_observation(sandbox):
    row = regrade(archived_run("echo broken >&2; exit 1"), "2026-08-30T12:00:00Z", sandbox)
    assert row["status"] == "error" and row["value"] is None
    assert row["error"] == "grader operational-value runtime error: broken"
    assert observations_table([row]).column("status").to_pylist() == ["error"]


def test_invalid_attainment_is_an_error_observation(sandbox):
    body = """echo '{"value":0.5,"case":{},"opportunityKey":"k","evidenceCutoff":"2026-09-01T00:00:00Z","maturesAt":"2026-09-02T00:00:00Z","provenance":[]}'"""
    row = regrade(archived_run(body), "2026-08-30T12:00:00Z", sandbox)
    assert row["error"] == (
        "grader operational-value runtime error: operational-value evaluator evidenceCutoff cannot follow evidenceAt"
    )


def test_archived_evaluator_must_match_the_manifest(sandbox, tmp_path):
    marker = tmp_path / "ran"
    run = archived_run(METRICS, evaluator_bytes=evaluator(f"touch '{marker}'; {METRICS}"))
    with pytest.raises(OperationalValueError, match=r"^operational-value evaluator digest mismatch: expected "):
        regrade(run, "2026-08-30T12:00:00Z", sandbox)
    assert not marker.exists()


def test_result_digest_must_match_the_manifest(sandbox):
    run = archived_run(METRICS, result_digest="0" * 64)
    with pytest.raises(OperationalValueError, match=r"^run 900 has inconsistent operational-value evaluator provenance$"):
        regrade(run, "2026-08-30T12:00:00Z", sandbox)


def test_run_identity_and_evidence_time_are_checked(sandbox):
    with pytest.raises(OperationalValueError, match=r"^grader artifact run identity does not match run 900$"):
        regrade(archived_run(METRICS, run_id="901"), "2026-08-30T12:00:00Z", sandbox)
    with pytest.raises(OperationalValueError, match=r"^evidence-at must be a UTC ISO-8601 timestamp$"):
        regrade(archived_run(METRICS), "2026-08-30", sandbox)


def test_no_sandbox_means_no_observation():
    with pytest.raises(SandboxUnavailableError):
        regrade(archived_run(METRICS), "2026-08-30T12:00:00Z", SandboxOptions(bwrap_path="/nonexistent/bwrap"))
