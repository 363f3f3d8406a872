"""Every gh-aw conformance case, case by case: preprocessing, evals and all 32 graders."""

from __future__ import annotations

import json

import pytest

from graders.formats.ghaw.preprocess import PreprocessReport, preprocess, read_evals
from graders.grading import registry
from graders.grading.engine import grade_trace
from graders.grading.plan import plan_with_overrides
from graders.jsrt.jscompat import js_stringify
from graders.runs.runfiles import local_run_files
from tests.conformance.ghaw_cases import Case, deep_equal, load_cases, result_disagreements

CASES = load_cases()
# Decision (README "Deviations"): a literal `null` JSONL line is dropped and counted instead of
# crashing preprocessing; these cases expect the reference's crash.
NULL_LINE_CRASH = {c.name for c in CASES if c.expected.get("crash")}


def _grade(case: Case) -> tuple[dict | None, dict | None, list[dict]]:
    plan = plan_with_overrides(case.config or {})
    if case.kind == "raw":
        files = local_run_files(case.path / "raw")
        report = PreprocessReport()
        trace = preprocess(files, report)
        evals = read_evals(files)
    else:
        trace = json.loads((case.path / "trace.json").read_text())
        evals = None
    return trace, evals, grade_trace(trace, plan)


def test_corpus_is_complete():
    assert len(CASES) == 150
    assert len(NULL_LINE_CRASH) == 2


@pytest.mark.parametrize("case", [c for c in CASES if c.kind == "raw"], ids=lambda c: c.name)
def test_preprocessing(case: Case):
    trace, evals, _ = _grade(case)
    if case.name in NULL_LINE_CRASH:
        # We do not crash: the run is graded with the null line dropped.
        assert trace is not None and all(e is not None for e in trace["tokenUsageEntries"])
        assert all(e is not None for e in trace["mcpGatewayEntries"])
        return
    # Compared as saved in grader_payload.json (JSON.stringify turns non-finite numbers into null).
    saved = json.loads(js_stringify(trace) or "null")
    assert deep_equal(saved, case.expected["trace"]), json.dumps(saved, indent=1)[:3000]
    assert deep_equal(evals, case.expected["evals"])


@pytest.mark.parametrize("case", [c for c in CASES if c.name not in NULL_LINE_CRASH], ids=lambda c: c.name)
def test_grader_results(case: Case):
    _, _, results = _grade(case)
    by_id = {r["id"]: r for r in results}
    problems = []
    compared = 0
    for want in case.expected["results"]:
        if registry.get(want["id"]) is None:
            continue
        compared += 1
        got = by_id.get(want["id"])
        if got is None:
            problems.append(f"{want['id']}: missing")
            continue
        diff = result_disagreements(got, want)
        if diff:
            problems.append(f"{want['id']}: {'; '.join(diff)}")
    assert compared >= 10
    assert not problems, "\n".join(problems)


def test_details_agreement():
    """Secondary score: ``details`` strings (JS toFixed rounding included) of every compared grader."""
    agree = total = 0
    mismatches = []
    for case in CASES:
        if case.name in NULL_LINE_CRASH:
            continue
        _, _, results = _grade(case)
        by_id = {r["id"]: r for r in results}
        for want in case.expected["results"]:
            if registry.get(want["id"]) is None:
                continue
            total += 1
            got = by_id.get(want["id"], {}).get("details")
            if got == want.get("details"):
                agree += 1
            else:
                mismatches.append(f"{case.name} {want['id']}: {got!r} != {want.get('details')!r}")
    print(f"details agree on {agree}/{total} (case, grader) pairs")
    assert agree == total, "\n".join(mismatches[:20])
