"""The cost graders (tokens-*, ai-credits, model-calls, cost-per-tool-call) and their reader
(graders/formats/usage.py): totals that reconcile exactly with the records of each source,
gh-aw's deduplication and AI Credits rule, and credits never invented."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.families.observed import grade_observed, model_mix
from graders.formats.evidence import TokenRecord, read_evidence
from graders.formats.usage import dedupe, epoch_ms, running_credits
from graders.runs.runfiles import local_run_files, memory_run_files

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
RUNS = REAL / "gh_aw_logs"
PROXY = "sandbox/firewall/logs/api-proxy-logs/token-usage.jsonl"
AUDIT = "sandbox/firewall-audit-logs/api-proxy-logs/token-usage.jsonl"
COST = ("tokens-input", "tokens-output", "tokens-cache-read", "tokens-cache-write", "tokens-reasoning", "ai-credits",
        "model-calls", "cost-per-tool-call")
ROUTER = ("routing", "classif", "router")


def graded(files: dict[str, bytes] | Path, trace: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    run = local_run_files(files) if isinstance(files, Path) else memory_run_files(files)
    return {r["id"]: r for r in grade_observed(read_evidence(run), trace=trace or {}) if r["id"] in COST}


def values(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {k: r.get("value") for k, r in results.items()}


def jsonl(*records: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def sums(records: list[dict[str, Any]], cache_inclusive: bool) -> dict[str, int]:
    """The expected classes of the agent's records, computed from the file apart from the reader."""
    agent = [r for r in records if not any(m in r.get("purpose", "").lower() for m in ROUTER)]
    read = sum(r.get("cache_read_tokens", 0) for r in agent)
    write = sum(r.get("cache_write_tokens", 0) for r in agent)
    fresh = sum(max(r["input_tokens"] - r.get("cache_read_tokens", 0) - r.get("cache_write_tokens", 0), 0)
                if cache_inclusive else r["input_tokens"] for r in agent)
    return {"tokens-input": fresh, "tokens-output": sum(r["output_tokens"] for r in agent), "tokens-cache-read": read,
            "tokens-cache-write": write, "model-calls": len(agent)}


# --- api-proxy token usage ----------------------------------------------------------------------


@pytest.mark.parametrize(("sample", "inclusive"), [("ghaw-copilot-subagent-failed-and-alias", True),
                                                   ("ghaw-copilot-routed-gpt-responses", True),
                                                   ("ghaw-claude-awf-steering-notices", False)])
def test_token_totals_reconcile_with_the_api_proxy_records(sample: str, inclusive: bool) -> None:
    records = lines(RUNS / sample / PROXY)
    r = graded(RUNS / sample)
    assert {k: r[k]["value"] for k in sums(records, inclusive)} == sums(records, inclusive)
    # AWF's own AI Credits: the last cumulative total, less the router's own figure (set apart).
    router = sum(x["ai_credits_this_response"] for x in records if x.get("purpose") == "routing_classification")
    assert r["ai-credits"]["value"] == pytest.approx(records[-1]["ai_credits_total"] - router, abs=1e-12)
    details = json.loads(r["ai-credits"]["details"])
    assert (details["run_total"], details["router"], details["uncovered"]) == (records[-1]["ai_credits_total"], router, 0)
    # gh-aw preserves AWF's figure in agent_usage.json instead of repricing: the run totals agree.
    usage = next((RUNS / sample).rglob("agent_usage.json"))
    assert json.loads(usage.read_text())["ai_credits"] == details["run_total"]
    assert r["tokens-reasoning"]["status"] == "unavailable"  # no record states reasoning tokens: never 0


def test_the_model_mix_and_the_router_are_counted_apart() -> None:
    r = graded(RUNS / "ghaw-copilot-subagent-failed-and-alias")
    details = json.loads(r["model-calls"]["details"])
    assert details["models"] == [{"model": "gpt-5.6-luna", "calls": 8}, {"model": "gpt-5.4-mini-2026-03-17", "calls": 2}]
    assert details["router_calls"] == {"routing_classification": 1}
    assert details["router_tokens"] == 835 + 261  # the classifier call's tokens, apart
    ev = read_evidence(local_run_files(RUNS / "ghaw-copilot-subagent-failed-and-alias"))
    assert model_mix(ev) == details["models"]


# --- agent_usage.json ---------------------------------------------------------------------------


@pytest.mark.parametrize("sample", ["ghaw-copilot-subagent-failed-and-alias", "ghaw-claude-awf-steering-notices",
                                    "ghaw-copilot-routed-gpt-responses"])
def test_token_totals_reconcile_with_agent_usage_json(sample: str) -> None:
    """A run with gh-aw's agent_usage.json alone: its totals are the sums of the run's records
    with the router call included (it cannot be set apart), read with the same cache rule."""
    usage = next((RUNS / sample).rglob("agent_usage.json"))
    doc = json.loads(usage.read_text())
    records = lines(RUNS / sample / PROXY)
    assert doc["input_tokens"] == sum(x["input_tokens"] for x in records)  # gh-aw's sums of every record
    r = graded({"agent_usage.json": usage.read_bytes()})
    inclusive = doc["primary_model"].startswith("gpt")
    with_router = sums([{**x, "purpose": ""} for x in records], inclusive)
    assert {k: r[k]["value"] for k in ("tokens-input", "tokens-output", "tokens-cache-read", "tokens-cache-write")} \
        == {k: with_router[k] for k in ("tokens-input", "tokens-output", "tokens-cache-read", "tokens-cache-write")}
    assert json.loads(r["tokens-input"]["details"])["router_included"] is True
    # Its ai_credits may be gh-aw's own pricing of the tokens: never read. No calls are listed either.
    assert (r["ai-credits"]["status"], r["model-calls"]["status"]) == ("unavailable", "unavailable")


def test_the_usage_artifacts_copy_of_agent_usage_is_read() -> None:
    usage = RUNS / "ghaw-copilot-subagent-failed-and-alias" / "usage" / "agent_usage.json"
    r = graded({"usage/agent_usage.json": usage.read_bytes(), "aw_info.json": b"{}"})
    assert r["tokens-output"]["value"] == 3249


# --- the unified session ------------------------------------------------------------------------


def test_token_totals_reconcile_with_the_unified_sessions_records() -> None:
    """usage/aw_session.jsonl alone: its agent-phase firewall.token_usage events are the proxy's
    records (the detection phase's are not the agent's)."""
    sample = RUNS / "ghaw-claude-awf-steering-notices"
    session = (sample / "usage" / "aw_session.jsonl").read_bytes()
    events = [e for e in lines(sample / "usage" / "aw_session.jsonl") if e["type"] == "firewall.token_usage"]
    agent = [e["data"] for e in events if e["provenance"]["phase"] == "agent"]
    assert len(agent) == 4 and len(events) == 8
    as_records = [{"input_tokens": d["usage"]["inputTokens"], "output_tokens": d["usage"]["outputTokens"],
                   "cache_read_tokens": d["usage"]["cacheReadInputTokens"],
                   "cache_write_tokens": d["usage"]["cacheCreationInputTokens"], "purpose": d.get("purpose", "")}
                  for d in agent]
    r = graded({"usage/aw_session.jsonl": session})
    assert {k: r[k]["value"] for k in sums(as_records, False)} == sums(as_records, False)
    assert r["ai-credits"]["value"] == pytest.approx(agent[-1]["totalAic"] - agent[0]["aic"], abs=1e-12)
    assert json.loads(r["ai-credits"]["details"])["source"] == "usage/aw_session.jsonl (firewall.token_usage)"
    # The same run read from its proxy file grades the same.
    assert values(graded(sample)) == values(r)


def test_a_copilot_checkpoint_usage_report_gives_credits_but_no_calls() -> None:
    session = jsonl({"type": "session.format", "data": {"version": 1}},
                    {"type": "usage.report", "timestamp": "2026-01-02T00:00:05Z",
                     "data": {"provider": "copilot", "totalAic": 2.5, "premiumRequests": 0}})
    r = graded({"usage/aw_session.jsonl": session})
    assert r["ai-credits"]["value"] == 2.5
    assert r["tokens-input"]["status"] == r["model-calls"]["status"] == "unavailable"


def test_usage_report_calls_are_read_when_there_is_no_firewall_record() -> None:
    session = jsonl({"type": "session.format", "data": {"version": 1}},
                    *({"type": "usage.report", "timestamp": f"2026-01-02T00:00:0{i}Z",
                       "data": {"model": "gpt-5", "requestId": f"r{i}", "aic": 0.5,
                                "usage": {"inputTokens": 100, "outputTokens": 7, "cacheReadInputTokens": 40,
                                          "reasoningOutputTokens": 3}}} for i in range(3)))
    r = graded({"usage/aw_session.jsonl": session})
    assert values(r) | {"cost-per-tool-call": None} == {
        "tokens-input": 180, "tokens-output": 21, "tokens-cache-read": 120, "tokens-cache-write": 0,
        "tokens-reasoning": 9, "ai-credits": 1.5, "model-calls": 3, "cost-per-tool-call": None}


# --- AI Credits: gh-aw's rule, and never invented ------------------------------------------------


def record(i: int, **kw: Any) -> dict[str, Any]:
    return {"event": "token_usage", "request_id": f"r{i}", "timestamp": f"2026-01-02T00:00:{i:02d}Z",
            "model": "gpt-5", "input_tokens": 100, "output_tokens": 10, **kw}


def test_credits_are_unavailable_without_figures_and_zero_only_when_stated() -> None:
    r = graded({PROXY: jsonl(record(1), record(2))})
    assert (r["ai-credits"]["status"], r["ai-credits"]["value"]) == ("unavailable", None)
    assert "never priced" in r["ai-credits"]["message"]
    assert r["cost-per-tool-call"]["status"] == "unavailable"
    r = graded({PROXY: jsonl(record(1, ai_credits_this_response=0, ai_credits_total=0))})
    assert (r["ai-credits"]["status"], r["ai-credits"]["value"]) == ("pass", 0.0)


def test_the_last_cumulative_total_in_time_order_is_the_runs_credits() -> None:
    # Written out of order; the chronologically last valid total wins, later deltas extend it.
    r = graded({PROXY: jsonl(record(3, ai_credits_this_response=1.0, ai_credits_total=3.5),
                             record(1, ai_credits_this_response=1.0, ai_credits_total=1.0),
                             record(4, ai_credits_this_response=0.25),
                             record(2, ai_credits_this_response=2.0, ai_credits_total=2.5))})
    details = json.loads(r["ai-credits"]["details"])
    assert (r["ai-credits"]["value"], details["summed"]) == (3.75, 4.25)  # AWF's total is kept though it differs


def test_calls_without_a_figure_after_the_last_total_are_not_counted_and_said() -> None:
    ev = read_evidence(memory_run_files({PROXY: jsonl(record(1, ai_credits_this_response=1.0, ai_credits_total=1.0),
                                                      record(2, ai_credits_this_response="0.5"),
                                                      record(3, ai_credits_this_response=-1))}))
    r = {x["id"]: x for x in grade_observed(ev)}
    assert r["ai-credits"]["value"] == 1.0
    assert json.loads(r["ai-credits"]["details"])["uncovered"] == 2
    assert "2 call(s) without a figure not counted" in r["ai-credits"]["message"]
    assert any("fleetgrade never prices tokens" in w for w in ev.warnings)


def test_a_router_call_without_a_figure_leaves_the_credits_whole_and_says_so() -> None:
    r = graded({PROXY: jsonl(record(1, purpose="routing_classification"),
                             record(2, ai_credits_this_response=1.0, ai_credits_total=3.0))})
    assert r["ai-credits"]["value"] == 3.0
    assert "router calls not separable" in r["ai-credits"]["message"]


def test_the_activity_summarys_run_total_is_the_last_resort() -> None:
    summary = REAL / "gh_aw_usage" / "friction-partial" / "usage" / "activity" / "summary.json"
    r = graded({"usage/activity/summary.json": summary.read_bytes()})
    details = json.loads(r["ai-credits"]["details"])
    assert (r["ai-credits"]["value"], details["uncovered"]) == (2.5, 1)  # total_run_aic_partial
    docs = REAL / "gh_aw_usage" / "docs-example" / "usage" / "activity" / "summary.json"
    assert graded({"usage/activity/summary.json": docs.read_bytes()})["ai-credits"]["status"] == "unavailable"


# --- deduplication and cache semantics ------------------------------------------------------------


def test_records_repeated_across_candidate_files_and_in_one_file_count_once() -> None:
    first = jsonl(record(1, ai_credits_this_response=1.0, ai_credits_total=1.0), record(2), record(2))
    second = jsonl(record(2), record(3, ai_credits_this_response=2.0, ai_credits_total=3.0),
                   {"input_tokens": 5, "output_tokens": 1}, {"input_tokens": 5, "output_tokens": 1})
    ev = read_evidence(memory_run_files({AUDIT: first, PROXY: second}))
    r = {x["id"]: x for x in grade_observed(ev)}
    assert r["model-calls"]["value"] == 4  # r1, r2, r3 and the one key-less line (its copy is the same line)
    assert r["ai-credits"]["value"] == 3.0
    assert json.loads(r["model-calls"]["details"])["duplicates"] == 3
    assert len(ev.token_records) == 3  # the token graders' file is still the first candidate, as read


def test_the_records_own_cache_semantics_win_over_the_model_family() -> None:
    r = graded({PROXY: jsonl(record(1, model="claude-x", input_tokens=500, cache_read_tokens=300,
                                    input_tokens_include_cache=True),
                             record(2, model="gpt-5", input_tokens=500, cache_read_tokens=300,
                                    input_tokens_include_cache=False))})
    assert (r["tokens-input"]["value"], r["tokens-cache-read"]["value"]) == (200 + 500, 600)
    ctx = {x["id"]: x for x in grade_observed(read_evidence(memory_run_files({PROXY: jsonl(
        record(1, model="claude-x", input_tokens=500, cache_read_tokens=300, input_tokens_include_cache=True))})))}
    assert json.loads(ctx["context-growth-cached"]["details"])["first_context"] == 500


def test_cost_per_tool_call_divides_the_credits_by_the_traces_tool_calls() -> None:
    r = graded({PROXY: jsonl(record(1, ai_credits_this_response=3.0, ai_credits_total=3.0))},
               trace={"toolCalls": [{}, {}, {}, {}]})
    assert r["cost-per-tool-call"]["value"] == 0.75


# --- properties ---------------------------------------------------------------------------------


def gh_aw_total(entries: list[dict[str, Any]]) -> float | None:
    """gh-aw's parseTokenUsageJsonl loop, transcribed: reported figures only (what fleetgrade
    reads; gh-aw would price a record without one, which fleetgrade never does)."""
    def valid(v: Any) -> float | None:
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 else None
    if not any(valid(e.get("ai_credits_this_response")) is not None or valid(e.get("ai_credits_total")) is not None
               for e in entries):
        return None
    keyed = [(epoch_ms(e.get("timestamp")), i, e) for i, e in enumerate(entries)]
    keyed.sort(key=lambda k: (k[0] is None, k[0] or 0, k[1]))
    running = 0.0
    for _, _, e in keyed:
        total, delta = valid(e.get("ai_credits_total")), valid(e.get("ai_credits_this_response"))
        running = total if total is not None else running + (delta or 0.0)
    return running


FIGURE = st.one_of(st.none(), st.floats(0, 100), st.sampled_from([-1.0, 0.0, 2.5]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.fixed_dictionaries({
    "request_id": st.sampled_from(["a", "b", "c", "d", "", " a "]),
    "timestamp": st.one_of(st.none(), st.sampled_from(["2026-01-02T00:00:01Z", "2026-01-02T00:00:03.5Z",
                                                       "2026-01-02T00:00:02+01:00", "garbage"])),
    "input_tokens": st.integers(0, 10**6), "output_tokens": st.integers(0, 10**5),
    "cache_read_tokens": st.integers(0, 10**6), "cache_write_tokens": st.integers(0, 10**5),
    "model": st.sampled_from(["gpt-5", "claude-sonnet-4.5", "other"]),
    "purpose": st.sampled_from(["", "", "routing_classification"]),
    "ai_credits_this_response": FIGURE, "ai_credits_total": FIGURE}), max_size=25))
def test_totals_and_credits_equal_an_independent_reading(entries: list[dict[str, Any]]) -> None:
    records = [{k: v for k, v in e.items() if v is not None} for e in entries]
    seen: set[str] = set()
    kept = []
    for rec in records:  # gh-aw's dedupe by event:request_id (a key-less record: its whole line)
        key = rec.get("request_id", "").strip() or json.dumps(rec, sort_keys=True)
        if key not in seen:
            seen.add(key)
            kept.append(rec)
    ev = read_evidence(memory_run_files({PROXY: jsonl(*records)}))
    r = {x["id"]: x for x in grade_observed(ev)}
    agent = [x for x in kept if x.get("purpose") != "routing_classification"]
    if not kept:
        assert r["model-calls"]["status"] == "unavailable"
        return
    assert r["model-calls"]["value"] == len(agent)
    assert r["tokens-output"]["value"] == sum(x["output_tokens"] for x in agent)
    fresh = 0
    for x in agent:
        inclusive = x["model"] == "gpt-5" or (x["model"] == "other" and
                                               x["cache_read_tokens"] + x["cache_write_tokens"] <= x["input_tokens"])
        fresh += max(x["input_tokens"] - x["cache_read_tokens"] - x["cache_write_tokens"], 0) if inclusive \
            else x["input_tokens"]
    assert r["tokens-input"]["value"] == fresh
    want = gh_aw_total(kept)
    if want is None:
        assert r["ai-credits"]["status"] == "unavailable"
    else:
        assert json.loads(r["ai-credits"]["details"])["run_total"] == want


def test_dedupe_keeps_the_first_of_each_key_and_is_idempotent() -> None:
    recs = [TokenRecord(1, 1, request_id="x"), TokenRecord(2, 2, request_id="x", event="other"),
            TokenRecord(3, 3, request_id=" x "), TokenRecord(4, 4), TokenRecord(4, 4)]
    kept, dropped = dedupe(recs)
    assert ([r.input for r in kept], dropped) == ([1, 2, 4], 2)
    assert dedupe(kept) == (kept, 0)
    assert running_credits(kept, "t") is None


def test_a_run_with_no_usage_has_no_cost_at_all_never_zero() -> None:
    """No token record, summary or engine log: every cost grader unavailable and every ``runs``
    cost column null (the table's cost is absent, not 0), no model mix."""
    from graders.tables.rows import COST_COLUMNS, cost_columns

    results = grade_observed(read_evidence(memory_run_files({"aw_info.json": b'{"engine_id": "copilot"}'})), trace={})
    cost = [r for r in results if r["id"] in COST]
    assert len(cost) == len(COST) and all(r["status"] == "unavailable" and r.get("value") is None for r in cost)
    assert cost_columns(results, None) == {**dict.fromkeys(COST_COLUMNS), "models": None}
