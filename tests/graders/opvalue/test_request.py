"""The §10 request built from recorded run metadata."""

from __future__ import annotations

import pytest

from graders.families.opvalue.errors import OperationalValueError
from graders.families.opvalue.request import RunSubject, build_regrade_request, build_request

INFO = {"run_id": 123456789, "run_attempt": "2", "repository": "octo/repo", "workflow_name": "Daily",
        "ref": "refs/heads/main", "sha": "abc", "event_name": "schedule", "created_at": "2026-08-01T10:00:00Z"}


def test_request_shape_from_aw_info():
    subject = RunSubject.from_aw_info(INFO)
    request = build_request(subject, outputs=[{"type": "create_issue"}], config={"label": "x"})
    assert request == {
        "schemaVersion": 1,
        "run": {"id": "123456789", "attempt": 2, "repository": "octo/repo", "workflow": "Daily",
                "ref": "refs/heads/main", "sha": "abc", "eventName": "schedule"},
        "event": {},
        "outputs": [{"type": "create_issue"}],
        "config": {"label": "x"},
    }
    assert list(request) == ["schemaVersion", "run", "event", "outputs", "config"]


def test_defaults_for_event_outputs_config_and_attempt():
    request = build_request(RunSubject(run_id="7", attempt="x"), outputs={"not": "a list"}, config=None,
                            event=["not", "an", "object"])
    assert request["run"]["attempt"] == 1
    assert request["event"] == {} and request["outputs"] == [] and request["config"] == {}
    assert build_request(RunSubject(run_id="7", attempt=0))["run"]["attempt"] == 1
    assert build_request(RunSubject(run_id="7"), event={"action": "opened"})["event"] == {"action": "opened"}


@pytest.mark.parametrize("run_id", ["", "0", "12a", "-1", " 12", "1.5"])
def test_run_subject_must_identify_the_run(run_id):
    with pytest.raises(OperationalValueError, match=r"^GITHUB_RUN_ID must identify the workflow run$"):
        build_request(RunSubject(run_id=run_id))


def test_regrade_request_adds_evidence_case_and_created_at():
    request = build_regrade_request(RunSubject.from_aw_info(INFO), "2026-08-30T12:00:00.000Z", case={"issue": 1})
    assert request["evidenceAt"] == "2026-08-30T12:00:00.000Z"
    assert request["case"] == {"issue": 1}
    assert request["run"]["createdAt"] == "2026-08-01T10:00:00Z"
    assert build_regrade_request(RunSubject(run_id="5"), "2026-08-30T12:00:00Z")["case"] is None
