"""Output validation: the newest metric array and the older attainment object."""

from __future__ import annotations

import orjson
import pytest

from graders.families.opvalue.errors import OperationalValueError
from graders.families.opvalue.output import (
    Attainment,
    metrics_raw_result,
    parse_output,
    raw_result,
)

PREFIX = "operational-value evaluator "


def err(stdout: str, **kw) -> str:
    with pytest.raises(OperationalValueError) as info:
        parse_output(stdout, **kw)
    return str(info.value)


def test_metric_array_primary_and_diagnostics():
    metrics = parse_output('[{"id":"merged","value":0.5},{"id":"opened","value":3},{"id":"2","value":null},{"value":1,"id":"1"}]')
    raw = raw_result(metrics)
    assert raw["value"] == 0.5
    assert raw["metrics"] == metrics
    assert list(raw["diagnostics"]) == ["1", "2", "opened"]  # JS object key order
    assert metrics_raw_result([{"id": "only", "value": None}]) == {"value": None, "metrics": [{"id": "only", "value": None}]}


def test_native_scale_no_range_check():
    assert parse_output('[{"id":"count","value":42.5},{"id":"neg","value":-1}]')[0]["value"] == 42.5


@pytest.mark.parametrize("stdout", ["", "null", "{}", "[]", '"x"', "3", '{"id":"a","value":1}'])
def test_not_a_non_empty_array(stdout):
    assert err(stdout) == PREFIX + "output must be a non-empty array"


@pytest.mark.parametrize("item", ['{"id":"a"}', '{"id":"a","value":1,"x":2}', "1", "[]", "null", '{"value":1}'])
def test_items_must_be_exactly_id_and_value(item):
    assert err(f"[{item}]") == PREFIX + "metrics must contain exactly id and value"


@pytest.mark.parametrize("items", ['{"id":"","value":1}', '{"id":"  ","value":1}', '{"id":3,"value":1}',
                                   '{"id":"a","value":1},{"id":"a","value":2}'])
def test_ids_must_be_non_empty_and_unique(items):
    assert err(f"[{items}]") == PREFIX + "metric ids must be non-empty and unique"


@pytest.mark.parametrize("value", ['"1"', "true", "[1]", "{}", "1e400"])
def test_values_must_be_null_or_finite(value):
    assert err(f'[{{"id":"a","value":{value}}}]') == PREFIX + "metric values must be null or finite numbers"


def test_invalid_json():
    assert err("[{").startswith(PREFIX + "returned invalid JSON: ")


def test_object_without_evidence_time_is_the_newest_protocol_error():
    assert err('{"value":1}') == PREFIX + "output must be a non-empty array"


ATTAINMENT = {
    "value": 0.75, "case": {"issue": 12}, "opportunityKey": "issue-12",
    "evidenceCutoff": "2026-08-29T00:00:00Z", "maturesAt": "2026-08-30T12:00:00.000Z",
    "provenance": [{"repository": "o/r", "kind": "pull_request", "ref": "#7"}],
    "message": "merged", "diagnostics": {"prs": 1},
}


def attain(evidence_at: str = "2026-08-30T12:00:00.000Z", baseline: float | None = None, **changes):
    output = {**ATTAINMENT, **changes}
    output = {k: v for k, v in output.items() if v is not ...}
    return parse_output(orjson.dumps(output).decode(), evidence_at=evidence_at, baseline=baseline)


def test_attainment_parsing():
    parsed = attain(baseline=0.5)
    assert isinstance(parsed, Attainment)
    assert parsed.value == 0.75 and parsed.opportunity_key == "issue-12" and parsed.mature is True
    assert parsed.baseline_value == 0.5 and parsed.delta_from_baseline == 0.25
    assert parsed.case == {"issue": 12}
    assert raw_result(parsed) == {"value": 0.75, "message": "merged", "diagnostics": {"prs": 1}}
    early = attain(evidence_at="2026-08-29T06:00:00Z")
    assert isinstance(early, Attainment) and early.mature is False and early.delta_from_baseline is None


def test_attainment_null_evidence():
    parsed = attain(value=None, provenance=[])
    assert isinstance(parsed, Attainment) and parsed.value is None and parsed.delta_from_baseline is None
    assert raw_result(parsed)["value"] is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"value": 1.5}, PREFIX + "result.value must be null or a finite number in [0,1]"),
        ({"value": ...}, PREFIX + "result.value must be null or a finite number in [0,1]"),
        ({"case": None}, PREFIX + "output.case must be an object"),
        ({"opportunityKey": " "}, PREFIX + "opportunityKey must be a non-empty string"),
        ({"evidenceCutoff": 5}, PREFIX + "evidenceCutoff must be a UTC ISO-8601 timestamp"),
        ({"evidenceCutoff": "2026-08-29"}, "evidenceCutoff must be a UTC ISO-8601 timestamp"),
        ({"maturesAt": "2026-08-30T12:00:00+01:00"}, "maturesAt must be a UTC ISO-8601 timestamp"),
        ({"evidenceCutoff": "2026-08-31T00:00:00Z", "maturesAt": "2026-09-01T00:00:00Z"},
         PREFIX + "evidenceCutoff cannot follow evidenceAt"),
        ({"maturesAt": "2026-08-28T00:00:00Z"}, PREFIX + "evidenceCutoff cannot follow maturesAt"),
        ({"provenance": []}, PREFIX + "must return provenance for a numeric value"),
        ({"provenance": ...}, PREFIX + "must return provenance for a numeric value"),
        ({"provenance": [{"repository": "o/r", "kind": "pr"}]},
         PREFIX + "provenance entries require repository, kind, and ref"),
    ],
)
def test_attainment_errors(changes, message):
    with pytest.raises(OperationalValueError) as info:
        attain(**changes)
    assert str(info.value) == message


def test_attainment_requires_a_valid_evidence_time():
    with pytest.raises(OperationalValueError, match=r"^evidence-at must be a UTC ISO-8601 timestamp$"):
        attain(evidence_at="yesterday")


def test_array_output_is_accepted_at_an_evidence_time_too():
    assert parse_output('[{"id":"a","value":1}]', evidence_at="2026-08-30T12:00:00Z") == [{"id": "a", "value": 1}]
