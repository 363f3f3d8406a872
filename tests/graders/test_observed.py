"""The observed graders (graders/families/observed.py), grader_drift rows and the trace rules'
use of the observed conclusion, on the real samples and synthetic runs (tests/graders/test_evidence.py
says why the failing runs are synthetic)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.families.observed import (
    context_tokens,
    grade_observed,
    observed_plan,
)
from graders.families.trace_rules.config import default_config
from graders.families.trace_rules.verdicts import grade_run
from graders.formats.evidence import ArchivedResult, RunEvidence, TokenRecord, read_evidence
from graders.formats.ghaw.trace import run_from_ghaw_trace
from graders.grading.plan import default_plan
from graders.runs.runfiles import local_run_files, memory_run_files
from graders.tables.drift import drift_rows
from schemas.documents import RunMeta
from tests.graders.test_evidence import RPC_403, RUN_SUMMARY_FAILED, STDIO_FAILED, jsonl

REAL = Path(__file__).resolve().parents[1] / "data" / "real" / "gh_aw_logs"
IDS = ["run-conclusion", "mcp-tool-error-count", "mcp-tool-success-rate", "safe-output-error-count",
       "context-growth-cached", "working-set-rebuild-factor-cached", "tool-call-count", "tool-error-count",
       "tokens-input", "tokens-output", "tokens-cache-read", "tokens-cache-write", "tokens-reasoning", "ai-credits",
       "model-calls", "cost-per-tool-call"]


def by_id(evidence: RunEvidence | None) -> dict[str, dict]:
    return {r["id"]: r for r in grade_observed(evidence)}


def test_the_family_is_registered_apart_from_gh_aws_plan():
    assert [e.id for e in observed_plan().entries] == IDS
    assert all(e.source == "fleetgrade" for e in observed_plan().entries)
    assert not set(IDS) & {e.id for e in default_plan().entries}  # manifests and graderCount stay gh-aw's


def test_the_failed_403_run_fails_its_observed_grades():
    ev = read_evidence(memory_run_files({"mcp-logs/rpc-messages.jsonl": RPC_403, "agent-stdio.log": STDIO_FAILED,
                                         "run_summary.json": RUN_SUMMARY_FAILED}))
    r = by_id(ev)
    assert (r["run-conclusion"]["value"], r["run-conclusion"]["status"]) == (0, "fail")
    assert json.loads(r["run-conclusion"]["details"])["source"] == "run_summary.json"
    assert r["run-conclusion"]["message"] == "run concluded failure: run_summary.json says failure"
    assert (r["mcp-tool-error-count"]["value"], r["mcp-tool-error-count"]["status"]) == (4, "pass")  # threshold 5
    assert (r["mcp-tool-success-rate"]["value"], r["mcp-tool-success-rate"]["status"]) == (0.2, "fail")
    assert (r["safe-output-error-count"]["value"], r["safe-output-error-count"]["status"]) == (2, "fail")
    details = json.loads(r["mcp-tool-error-count"]["details"])
    assert details["by_server"] == {"github": {"calls": 2, "errors": 2}, "safeoutputs": {"calls": 3, "errors": 2}}
    assert all(x["source"] == "fleetgrade" for x in r.values())
    assert all(x["implementation"]["id"] == "fleetgrade/observed" for x in r.values())


def test_a_run_without_evidence_is_unavailable_not_passing():
    r = by_id(RunEvidence())
    assert {k: v["status"] for k, v in r.items()} == dict.fromkeys(IDS, "unavailable")
    assert by_id(None)["run-conclusion"]["status"] == "unavailable"


def test_mcp_rate_is_unavailable_with_a_gateway_log_but_no_tool_calls():
    rpc = jsonl({"type": "REQUEST", "server_id": "github", "method": "tools/list", "payload": {"method": "tools/list"}})
    r = by_id(read_evidence(memory_run_files({"mcp-logs/rpc-messages.jsonl": rpc})))
    assert r["mcp-tool-success-rate"]["status"] == "unavailable"
    assert (r["mcp-tool-error-count"]["value"], r["mcp-tool-error-count"]["status"]) == (0, "pass")


def claude(inp: int, out: int, read: int, write: int, purpose: str = "") -> TokenRecord:
    return TokenRecord(inp, out, read, write, purpose, "claude-sonnet-4.5")


def test_context_sizes_count_cached_tokens_once():
    assert context_tokens(claude(2, 9, 58798, 584)) == 2 + 58798 + 584
    assert context_tokens(TokenRecord(21902, 5, 21280, 0, "", "gpt-5.6-luna")) == 21902  # input includes the cache
    assert context_tokens(TokenRecord(10, 5, 100, 0, "", "some-model")) == 110  # cache beyond input: exclusive
    assert context_tokens(TokenRecord(500, 5, 100, 0, "", "some-model")) == 500


def test_context_growth_cached_uses_gh_aws_formula_without_the_classifier_call():
    records = (claude(800, 20, 0, 0, "routing_classification"), claude(2, 10, 0, 1000), claude(2, 10, 1000, 500),
               claude(2, 10, 1500, 200))
    r = by_id(RunEvidence(token_file="t.jsonl", token_records=records))
    sizes = [1002, 1502, 1702]
    assert r["context-growth-cached"]["value"] == pytest.approx((sum(sizes) + 30) / (1002 + 10))
    assert r["working-set-rebuild-factor-cached"]["value"] == pytest.approx(sum(sizes) / 1702)
    details = json.loads(r["context-growth-cached"]["details"])
    assert (details["excluded_purpose"], details["agent_calls"], details["first_context"]) == (1, 3, 1002)
    one = by_id(RunEvidence(token_records=records[:2]))
    assert one["context-growth-cached"]["value"] == 1.0  # one agent call
    assert by_id(RunEvidence(token_records=records[:1]))["context-growth-cached"]["status"] == "unavailable"


def test_cached_graders_on_the_real_routed_runs():
    ev = read_evidence(local_run_files(REAL / "ghaw-copilot-subagent-failed-and-alias"))
    agent = [r for r in ev.token_records if r.purpose != "routing_classification"]
    sizes = [context_tokens(r) for r in agent]
    r = by_id(ev)
    first = sizes[0] + agent[0].output
    assert r["context-growth-cached"]["value"] == pytest.approx((sum(sizes) + sum(a.output for a in agent)) / first)
    assert json.loads(r["context-growth-cached"]["details"])["excluded_purpose"] == 1


META = RunMeta(workflow="wf", date="2026-11-30", run_id="1", attempt=1, metadata_source="aw_info", root="r")


def test_drift_rows_name_what_differs_with_both_sides():
    results = [{"id": "tool-success-rate", "value": 1, "status": "pass", "message": None},
               {"id": "loops", "value": 0, "status": "pass"},
               {"id": "retries", "value": 0, "status": "pass"}]
    archived = (ArchivedResult("tool-success-rate", 0.5, "fail", "2 of 4 failed"), ArchivedResult("loops", 0.0, "pass", None),
                ArchivedResult("only-archived", 1.0, "pass", None))
    rows = drift_rows(META, RunEvidence(archived_file="agent/graders/grader_results.json", archived_results=archived),
                      results)
    assert [(r["grader_id"], r["differs"]) for r in rows] == [("tool-success-rate", ["value", "status", "message"])]
    row = rows[0]
    assert (row["archived_value"], row["archived_status"], row["value"], row["status"]) == (0.5, "fail", 1.0, "pass")
    assert row["archived_path"] == "agent/graders/grader_results.json"
    assert drift_rows(META, RunEvidence(), results) == []


def test_a_failed_run_is_a_trace_fail_even_with_a_high_flag():
    trace = {"toolCalls": [{"name": "bash", "arguments": {"command": "rm -rf /"}}], "agentOutput": {"errors": []}}
    cfg = dataclasses.replace(default_config(), forbidden_tools=frozenset({"bash"}))
    unknown = grade_run(run_from_ghaw_trace(trace, "t", "1"), cfg)
    failed = grade_run(run_from_ghaw_trace(trace, "t", "1", "failure"), cfg)
    succeeded = grade_run(run_from_ghaw_trace(trace, "t", "1", "success"), cfg)
    assert (unknown.delivered, unknown.verdict) == (True, "corrupt-success")  # today's rule, kept when unknown
    assert succeeded.verdict == "corrupt-success"
    assert (failed.delivered, failed.verdict, failed.flags[0].severity) == (False, "fail", "high")
    errors = {"toolCalls": [], "agentOutput": {"errors": ["bad item"]}}
    assert grade_run(run_from_ghaw_trace(errors, "t", "1", "success"), cfg).verdict == "fail"  # success never overrides


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50), st.integers(0, 50), st.integers(0, 50),
                          st.sampled_from(["", "agent", "Routing_x", "classifier"]),
                          st.sampled_from(["gpt-5", "claude-opus", "some-model", "azure/gpt-4o", "O3-mini", ""])),
                max_size=20))
def test_the_token_graders_read_each_record_as_the_per_record_rules_do(rows):
    from graders.families.observed import _contexts, agent_records, cache_inclusive

    records = tuple(TokenRecord(*row) for row in rows)
    kept, excluded = agent_records(RunEvidence(token_records=records), {})
    marks = ("routing", "classif", "router")
    assert kept == [r for r in records if not any(m in r.purpose.lower() for m in marks)]
    assert excluded == len(records) - len(kept)
    assert _contexts(kept) == ([context_tokens(r) for r in kept], sum(map(cache_inclusive, kept)))


def test_what_the_token_graders_share_in_a_run_depends_on_the_excluded_purposes():
    from graders.families.observed import context_growth_cached

    records = (claude(800, 20, 0, 0, "routing_classification"), claude(2, 10, 0, 1000), claude(2, 10, 1000, 500))
    ev = RunEvidence(token_file="t.jsonl", token_records=records)
    default = context_growth_cached(ev, {})
    everything = context_growth_cached(ev, {"exclude_purposes": []})
    assert json.loads(default["details"])["agent_calls"] == 2
    assert json.loads(everything["details"])["agent_calls"] == 3
    assert context_growth_cached(ev, {}) == default
