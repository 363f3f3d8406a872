"""The observed graders: fleetgrade's own grades of what a real run carries (source ``fleetgrade``).

gh-aw's graders read the preprocessed trace only, so a run whose agent exited 1, whose MCP calls
got 403 or whose safe outputs failed still grades as fine. These graders read the run's
``RunEvidence`` (graders/formats/evidence.py) instead. Each is a pure function of
(evidence, config); ids never collide with gh-aw's, and none is part of a gh-aw plan (manifests
and ``graderCount`` stay the reference's): they are graded beside it by :func:`grade_observed`.
Each is registered with ``registry.grader(..., source="fleetgrade", family="observed")``.
Formulas, inputs and reasons: docs/observed-graders.md.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import orjson

from graders.formats.evidence import McpCall, RunEvidence, TokenRecord
from graders.formats.usage import CallTotals, call_totals, includes_cache, model_counts_cache, router_credits
from graders.grading import registry
from graders.grading.engine import grade_trace
from graders.grading.plan import GradingPlan, entry_from_spec
from graders.grading.registry import GraderContext
from schemas.grader import Direction

SOURCE: Final = "fleetgrade"
OBSERVED: Final = "observed"  # the family
IMPLEMENTATION_ID: Final = "fleetgrade/observed"
LISTED: Final = 20  # errors listed in a result's details
# Token-usage ``purpose`` values that are not agent steps: the model router's classifier call
# (``routing_classification``). Matched as substrings; a grader's config may replace them.
EXCLUDED_PURPOSES: Final = ("routing", "classif", "router")

Raw = dict[str, Any] | None
ObservedFn = Callable[[RunEvidence, Mapping[str, Any]], Raw]
TraceFn = Callable[[RunEvidence, Mapping[str, Any], Mapping[str, Any]], Raw]


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _unavailable(message: str, details: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"value": None, "message": message}
    if details is not None:
        out["details"] = _json(details)
    return out


# --- run-conclusion ---------------------------------------------------------------------------


def run_conclusion(ev: RunEvidence, config: Mapping[str, Any]) -> Raw:
    """1 when the run concluded successfully, 0 when any source says it failed."""
    sources = [{"source": c.source, "path": c.path, "value": c.value, "outcome": c.outcome}
               for c in ev.conclusions]
    decided, source = ev.conclusion, ev.conclusion_source
    if decided is None or source is None:
        return _unavailable("no source states how the run ended (run_summary.json, aw_info.json "
                            "workflow_run_conclusion, unified session, agent-stdio.log)",
                            {"conclusion": None, "sources": sources} if sources else None)
    return {
        "value": 1 if decided == "success" else 0,
        "message": f"run concluded {decided}: {source.source} says {source.value}",
        "details": _json({"conclusion": decided, "source": source.source, "sources": sources}),
    }


# --- MCP calls --------------------------------------------------------------------------------


def _mcp_details(ev: RunEvidence, calls: Sequence[McpCall]) -> dict[str, Any]:
    errors = [c for c in calls if c.outcome != "ok"]
    by_server: dict[str, dict[str, int]] = {}
    for c in calls:
        s = by_server.setdefault(c.server, {"calls": 0, "errors": 0})
        s["calls"] += 1
        s["errors"] += c.outcome != "ok"
    return {
        "file": ev.mcp_file,
        "calls": len(calls),
        "errors": len(errors),
        "unanswered": sum(c.outcome == "unanswered" for c in calls),
        "by_server": by_server,
        "listed": [{"server": c.server, "tool": c.tool, "request_line": c.request_line,
                    "response_line": c.response_line, "outcome": c.outcome, "error": c.error}
                   for c in errors[:LISTED]],
        "orphan_responses": len(ev.mcp_orphan_responses),
        "difc_filtered": ev.mcp_filtered,
    }


def mcp_tool_error_count(ev: RunEvidence, config: Mapping[str, Any]) -> Raw:
    """MCP ``tools/call`` requests answered with an error, or never answered."""
    if ev.mcp_file is None:
        return _unavailable("no mcp-logs/rpc-messages.jsonl in the run")
    calls = ev.tool_calls
    d = _mcp_details(ev, calls)
    return {"value": d["errors"], "details": _json(d),
            "message": f"{d['errors']} of {d['calls']} MCP tool calls failed ({d['unanswered']} unanswered)"}


def mcp_tool_success_rate(ev: RunEvidence, config: Mapping[str, Any]) -> Raw:
    """Share of MCP ``tools/call`` requests answered without an error."""
    calls = ev.tool_calls
    if not calls:
        return _unavailable("no MCP tool calls in the run" if ev.mcp_file else "no mcp-logs/rpc-messages.jsonl in the run")
    d = _mcp_details(ev, calls)
    return {"value": (d["calls"] - d["errors"]) / d["calls"], "details": _json(d),
            "message": f"{d['calls'] - d['errors']} of {d['calls']} MCP tool calls succeeded"}


# --- every tool call ----------------------------------------------------------------------------


def _calls_details(ev: RunEvidence) -> dict[str, Any]:
    n = ev.call_counts
    return {
        "source": ev.calls_source,
        "gateway": ev.gateway_file,
        "calls": n.calls,
        "errors": n.errors,
        "unanswered": n.unanswered,
        "native": n.native,
        "mcp_only": n.calls - n.native,
        "by_tool": {tool: {"calls": calls, "errors": errors} for tool, calls, errors in n.by_tool},
        "listed": [{"tool": tool, "server": server, "agent": agent, "call_id": cid, "error": error}
                   for tool, server, agent, cid, error in n.listed],
    }


def tool_call_count(ev: RunEvidence, config: Mapping[str, Any]) -> Raw:
    """Every tool call the run's logs show, native and MCP, each once (docs/formats.md §8.3)."""
    if ev.calls_source is None:
        return _unavailable("no log of the run's tool calls (no unified session, engine log, session "
                            "events or MCP gateway log)")
    d = _calls_details(ev)
    return {"value": d["calls"], "details": _json(d),
            "message": f"{d['calls']} tool call(s) ({d['mcp_only']} seen by the MCP gateway only, "
                       f"{d['unanswered']} unanswered) in {ev.calls_source}"}


def tool_error_count(ev: RunEvidence, config: Mapping[str, Any]) -> Raw:
    """The tool calls that failed: an error flag, a non-zero exit code, a failed or declined status,
    a sandbox refusal (unanswered calls are no errors: counted apart)."""
    if ev.calls_source is None:
        return _unavailable("no log of the run's tool calls (no unified session, engine log, session "
                            "events or MCP gateway log)")
    d = _calls_details(ev)
    return {"value": d["errors"], "details": _json(d),
            "message": f"{d['errors']} of {d['calls']} tool call(s) failed ({d['unanswered']} unanswered)"}


# --- safe outputs -----------------------------------------------------------------------------


def safe_output_error_count(ev: RunEvidence, config: Mapping[str, Any]) -> Raw:
    """Safe-output operations that reported an error (to the agent, or when applied)."""
    if not ev.safe_output_sources:
        return _unavailable("no safe-output evidence in the run (mcp-logs/rpc-messages.jsonl, "
                            "safe-output-errors.json, unified session)")
    errors = ev.safe_output_errors
    details = {"sources": list(ev.safe_output_sources), "errors": len(errors),
               "listed": [{"type": e.type, "message": e.message, "source": e.source} for e in errors[:LISTED]]}
    types = sorted({e.type for e in errors if e.type})
    return {"value": len(errors), "details": _json(details),
            "message": f"{len(errors)} safe-output operation(s) reported an error"
                       + (f" ({', '.join(types)})" if types else "")}


# --- cache-aware token graders ----------------------------------------------------------------


def cache_inclusive(record: TokenRecord) -> bool:
    """Whether the record's ``input_tokens`` already count its cached tokens (the record's own
    ``input_tokens_include_cache``, else the model family: graders/formats/usage.py)."""
    return includes_cache(record)


def context_tokens(record: TokenRecord) -> int:
    """The tokens the model read for one call: input + cache read + cache write, counting
    cached tokens once where ``input_tokens`` already includes them."""
    if cache_inclusive(record):
        return record.input
    return record.input + record.cache_read + record.cache_write


def _contexts(records: Sequence[TokenRecord]) -> tuple[list[int], int]:
    """(:func:`context_tokens` of each record, how many are :func:`cache_inclusive`).

    A large run holds tens of thousands of records and a handful of models: each model is
    classified once, and a run whose models all say how they count reads each record in one step."""
    # Comprehensions, not attrgetter maps: a struct field read there is about twice as fast.
    if any(r.include_cache is not None for r in records):  # the records say: per record
        flags = [cache_inclusive(r) for r in records]
        return [r.input if f else r.input + r.cache_read + r.cache_write
                for r, f in zip(records, flags, strict=True)], sum(flags)
    known = {m: model_counts_cache(m) for m in {r.model for r in records}}
    if all(known.values()):
        return [r.input for r in records], len(records)
    if not any(k is None or k for k in known.values()):
        return [r.input + r.cache_read + r.cache_write for r in records], 0
    sizes: list[int] = []
    inclusive = 0
    for r in records:
        k = known[r.model]
        if k is None:
            k = r.cache_read + r.cache_write <= r.input
        if k:
            sizes.append(r.input)
            inclusive += 1
        else:
            sizes.append(r.input + r.cache_read + r.cache_write)
    return sizes, inclusive


def _agent_contexts(ev: RunEvidence, config: Mapping[str, Any]) -> tuple[list[TokenRecord], int, list[int], int]:
    """(agent records, excluded, their context sizes, cache-inclusive count): shared by both
    token graders of a run (the same purposes excluded, the same answer)."""
    key = ("observed.contexts", _marks(config))
    found = ev.derived.get(key)
    if found is None:
        kept, dropped = agent_records(ev, config)
        found = ev.derived[key] = (kept, dropped, *_contexts(kept))
    kept, dropped, sizes, inclusive = found
    return kept, dropped, sizes, inclusive


def _marks(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The lowercased ``exclude_purposes`` marks (router/classifier calls by default)."""
    excluded = config.get("exclude_purposes", EXCLUDED_PURPOSES)
    return tuple(m.lower() for m in excluded if isinstance(m, str) and m) if isinstance(excluded, list | tuple) else ()


def agent_records(ev: RunEvidence, config: Mapping[str, Any]) -> tuple[list[TokenRecord], int]:
    """The agent's own calls (router/classifier ``purpose`` excluded), and how many were excluded."""
    marks = _marks(config)
    # Each distinct purpose is tested once (a run has a few, over all its records).
    dropped = {p for p in {r.purpose for r in ev.token_records} if any(m in p.lower() for m in marks)}
    kept = [r for r in ev.token_records if r.purpose not in dropped] if dropped else list(ev.token_records)
    return kept, len(ev.token_records) - len(kept)


def _token_details(ev: RunEvidence, kept: Sequence[TokenRecord], excluded: int, sizes: Sequence[int],
                   inclusive: int) -> str:
    return _json({"file": ev.token_file, "records": len(ev.token_records), "excluded_purpose": excluded,
                  "agent_calls": len(kept), "first_context": sizes[0] if sizes else None,
                  "peak_context": max(sizes) if sizes else None, "cache_inclusive_calls": inclusive})


def context_growth_cached(ev: RunEvidence, config: Mapping[str, Any]) -> Raw:
    """gh-aw's context-growth over cache-aware context sizes and agent calls only:
    Σ(context_i + output_i) / (context_1 + output_1); 1 with one call or a zero first call."""
    kept, excluded, sizes, inclusive = _agent_contexts(ev, config)
    if not kept:
        return _unavailable("no agent token-usage records in the run")
    first = sizes[0] + kept[0].output
    value = 1.0 if len(kept) < 2 or first == 0 else (sum(sizes) + sum([r.output for r in kept])) / first
    return {"value": value, "details": _token_details(ev, kept, excluded, sizes, inclusive)}


def working_set_rebuild_factor_cached(ev: RunEvidence, config: Mapping[str, Any]) -> Raw:
    """gh-aw's working-set-rebuild-factor over cache-aware context sizes and agent calls only:
    max(1, Σ context_i / max context_i)."""
    kept, excluded, sizes, inclusive = _agent_contexts(ev, config)
    if not sizes or max(sizes) == 0:
        return _unavailable("no agent token-usage records with a context size in the run")
    return {"value": max(1.0, sum(sizes) / max(sizes)), "details": _token_details(ev, kept, excluded, sizes, inclusive)}


# --- cost: tokens, model calls and AI Credits (graders/formats/usage.py) --------------------------

# The token graders: grader id → (CallTotals / UsageTotals attribute, what it counts).
_TOKEN_CLASSES: Final = {
    "tokens-input": ("input", "input tokens read fresh (cached tokens apart)"),
    "tokens-output": ("output", "output tokens"),
    "tokens-cache-read": ("cache_read", "cache-read tokens"),
    "tokens-cache-write": ("cache_write", "cache-write tokens"),
    "tokens-reasoning": ("reasoning", "reasoning tokens"),
}
_NO_USAGE: Final = ("no token usage in the run (AWF token-usage records, unified-session usage events, "
                    "agent_usage.json)")


def agent_totals(ev: RunEvidence, config: Mapping[str, Any]) -> CallTotals | None:
    """The agent's calls' totals (router/classifier calls apart by the config's purposes),
    computed once per run and purposes; None without per-call records."""
    calls = ev.usage.calls
    if calls is None:
        return None
    key = ("observed.cost", _marks(config))
    found = ev.derived.get(key)
    if found is None:
        found = ev.derived[key] = call_totals(calls, _marks(config))
    return found  # type: ignore[no-any-return]


def _call_details(t: CallTotals) -> dict[str, Any]:
    return {"source": t.source, "agent_calls": t.calls, "tokens": {
                "input": t.input, "output": t.output, "cache_read": t.cache_read, "cache_write": t.cache_write,
                "reasoning": t.reasoning},
            "cache_inclusive_calls": t.cache_inclusive, "router_calls": t.excluded, "router_tokens": t.excluded_tokens,
            "duplicates": t.duplicates, "models": [{"model": m, "calls": n} for m, n in t.models[:LISTED]]}


def _token_grader(gid: str) -> ObservedFn:
    attr, what = _TOKEN_CLASSES[gid]

    def grade(ev: RunEvidence, config: Mapping[str, Any]) -> Raw:
        totals = agent_totals(ev, config)
        if totals is not None:
            value = getattr(totals, attr)
            if value is None:
                return _unavailable(f"no model call in {totals.source} states its {what}", _call_details(totals))
            return {"value": value, "details": _json(_call_details(totals)),
                    "message": f"{value} {what} over {totals.calls} agent call(s) ({totals.source})"}
        summary = ev.usage.totals
        if summary is None:
            return _unavailable(_NO_USAGE)
        value = summary.fresh_input if attr == "input" else getattr(summary, attr)
        details = {"source": summary.source, "primary_model": summary.model, "router_included": summary.router_included,
                   "input_as_logged": summary.input, "input_includes_cache": summary.input_includes_cache}
        if value is None:
            return _unavailable(f"{summary.source} states no {what}", details)
        note = ", router calls included" if summary.router_included else ""
        return {"value": value, "details": _json(details),
                "message": f"{value} {what} ({summary.source}: run totals{note})"}

    grade.__name__ = gid.replace("-", "_")
    return grade


def ai_credits(ev: RunEvidence, config: Mapping[str, Any]) -> Raw:
    """The run's AI Credits as its logs state them, router/classifier calls apart; never priced."""
    credits = ev.usage.credits
    if credits is None:
        return _unavailable("no AI Credits figure in the run's logs (ai_credits_* of AWF token-usage records, the "
                            "unified session's aic/totalAic, usage/activity/summary.json); tokens are never priced")
    router = router_credits(credits, _marks(config))
    value = max(credits.total - router, 0.0) if router is not None else credits.total
    details = {"source": credits.source, "run_total": credits.total, "router": router,
               "reported": credits.reported, "uncovered": credits.uncovered, "summed": credits.summed}
    notes = []
    if router:
        notes.append(f"router/classifier calls' {router:.6g} apart")
    elif router is None:
        notes.append("router calls not separable")
    if credits.uncovered:
        notes.append(f"{credits.uncovered} call(s) without a figure not counted")
    return {"value": value, "details": _json(details),
            "message": f"{value:.6g} AIC ({credits.source}" + "".join(f"; {n}" for n in notes) + ")"}


def model_calls(ev: RunEvidence, config: Mapping[str, Any]) -> Raw:
    """The agent's model calls (router/classifier calls apart), and the model mix in details."""
    totals = agent_totals(ev, config)
    if totals is None:
        return _unavailable("no per-call usage records in the run (AWF token-usage records, unified-session usage "
                            "events)")
    mix = ", ".join(f"{m} {n}" for m, n in totals.models[:3]) + (", …" if len(totals.models) > 3 else "")
    return {"value": totals.calls, "details": _json(_call_details(totals)),
            "message": f"{totals.calls} agent model call(s)" + (f": {mix}" if mix else "")}


def cost_per_tool_call(ev: RunEvidence, config: Mapping[str, Any], trace: Mapping[str, Any]) -> Raw:
    """AI Credits per tool call: the ``ai-credits`` value over the run's tool calls."""
    spent = ai_credits(ev, config)
    if spent is None or spent.get("value") is None:
        return _unavailable("no AI Credits figure in the run's logs")
    calls, source = tool_call_total(ev, trace)
    if not calls:
        return _unavailable(f"no tool calls in the run ({source})")
    value = spent["value"] / calls
    return {"value": value, "details": _json({"ai_credits": spent["value"], "tool_calls": calls, "source": source}),
            "message": f"{value:.6g} AIC per tool call ({spent['value']:.6g} AIC over {calls} tool call(s))"}


def tool_call_total(ev: RunEvidence, trace: Mapping[str, Any]) -> tuple[int, str]:
    """(tool calls, where they were counted): ``tool-call-count``'s (every call the run's logs
    show, each once), else the preprocessed trace's (gh-aw's reading)."""
    if ev.calls_source is not None:
        return ev.call_counts.calls, ev.calls_source
    calls = trace.get("toolCalls") if isinstance(trace, Mapping) else None
    return (len(calls) if isinstance(calls, list) else 0), "the trace's toolCalls"


def model_mix(ev: RunEvidence | None) -> list[dict[str, Any]] | None:
    """The run's model mix, [{model, calls}] (the ``runs`` table's ``models``): the agent's calls
    per model by the default purposes, as ``model-calls`` counts them; None without per-call records."""
    totals = agent_totals(ev, {}) if ev is not None else None
    return None if totals is None else [{"model": m, "calls": n} for m, n in totals.models]


# --- registration and grading -----------------------------------------------------------------


class _OnEvidence:
    """A registry grader function (trace, ctx) that grades ``ctx.evidence`` with ``ctx.config``
    (and the trace, for the few that count what gh-aw's preprocessing read)."""

    def __init__(self, fn: ObservedFn | TraceFn, with_trace: bool = False) -> None:
        self.fn = fn
        self.with_trace = with_trace

    def __call__(self, trace: dict[str, Any], ctx: GraderContext) -> Raw:
        evidence = ctx.evidence if isinstance(ctx.evidence, RunEvidence) else RunEvidence()
        config = ctx.config if isinstance(ctx.config, Mapping) else {}
        if self.with_trace:
            return self.fn(evidence, config, trace)  # type: ignore[call-arg]
        return self.fn(evidence, config)  # type: ignore[call-arg]


def _observed(gid: str, name: str, description: str, unit: str, direction: Direction,
              threshold: float | None = None, lo: float | None = None, hi: float | None = None,
              revision: int = 1) -> None:
    """Register the pure ``(RunEvidence, config)`` function of ``gid`` as a grader of source
    ``fleetgrade``, family ``observed``: one description, graded beside every plan."""
    grader = registry.grader(gid, name=name, description=description, unit=unit, direction=direction,
                             family=OBSERVED, threshold=threshold, min=lo, max=hi, revision=revision, source=SOURCE)
    fn = _FUNCTIONS.get(gid)
    grader(_OnEvidence(fn) if fn is not None else _OnEvidence(_TRACE_FUNCTIONS[gid], with_trace=True))


_FUNCTIONS: Final[dict[str, ObservedFn]] = {
    "run-conclusion": run_conclusion,
    "mcp-tool-error-count": mcp_tool_error_count,
    "mcp-tool-success-rate": mcp_tool_success_rate,
    "safe-output-error-count": safe_output_error_count,
    "tool-call-count": tool_call_count,
    "tool-error-count": tool_error_count,
    "context-growth-cached": context_growth_cached,
    "working-set-rebuild-factor-cached": working_set_rebuild_factor_cached,
    **{gid: _token_grader(gid) for gid in _TOKEN_CLASSES},
    "ai-credits": ai_credits,
    "model-calls": model_calls,
}
_TRACE_FUNCTIONS: Final[dict[str, TraceFn]] = {"cost-per-tool-call": cost_per_tool_call}

_observed("run-conclusion", "Run Conclusion",
          "1 when the run concluded successfully, 0 when run_summary.json, aw_info.json, the unified session "
          "or the agent's exit status says it failed", "boolean", "higher_is_better", 1, 0, 1)
_observed("mcp-tool-error-count", "MCP Tool Error Count",
          "MCP tools/call requests answered with isError, a JSON-RPC error or {\"result\":\"error\"}, or never answered",
          "count", "lower_is_better", 5)
_observed("mcp-tool-success-rate", "MCP Tool Success Rate",
          "share of MCP tools/call requests answered without an error (requests paired with gateway responses)",
          "ratio", "higher_is_better", 0.8, 0, 1)
_observed("safe-output-error-count", "Safe-Output Error Count",
          "safe-output operations that reported an error to the agent or failed when applied",
          "count", "lower_is_better", 0)
_observed("context-growth-cached", "Context Growth (cache-aware)",
          "context-growth over input + cache read + cache write tokens, router/classifier calls excluded",
          "factor", "lower_is_better", revision=2)
_observed("working-set-rebuild-factor-cached", "Working-Set Rebuild Factor (cache-aware)",
          "working-set-rebuild-factor over input + cache read + cache write tokens, router/classifier calls excluded",
          "factor", "lower_is_better", lo=1, revision=2)
_observed("tool-call-count", "Tool Call Count",
          "every tool call the run's logs show, the engine's native calls and MCP calls, each call id once",
          "count", "lower_is_better")
_observed("tool-error-count", "Tool Error Count",
          "tool calls that failed: an error flag, a non-zero exit code, a failed or declined status, a sandbox refusal",
          "count", "lower_is_better", 5)
for _gid, (_attr, _what) in _TOKEN_CLASSES.items():
    _observed(_gid, f"Tokens ({_attr.replace('_', ' ')})",
              f"{_what} of the agent's model calls (router/classifier calls apart), each call once",
              "tokens", "lower_is_better", lo=0)
_observed("ai-credits", "AI Credits",
          "the run's AI Credits (AIC) as its logs state them (AWF ai_credits_*, the unified session's aic, "
          "usage/activity/summary.json), router/classifier calls apart; never priced from tokens",
          "AIC", "lower_is_better", lo=0)
_observed("model-calls", "Model Calls",
          "the agent's model calls (router/classifier calls apart), each request once; the model mix in details",
          "count", "lower_is_better", lo=0)
_observed("cost-per-tool-call", "Cost per Tool Call", "AI Credits per tool call of the run",
          "AIC per tool call", "lower_is_better", lo=0)


@functools.cache
def observed_plan() -> GradingPlan:
    """Every observed grader with its defaults: the plan graded beside every run's own."""
    return GradingPlan(tuple(entry_from_spec(s) for s in registry.all_specs(OBSERVED)))


def grade_observed(evidence: RunEvidence | None, plan: GradingPlan | None = None,
                   trace: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The observed graders' results for one run, through the engine (the evidence reaches each
    grader in its ``GraderContext``), normalized as gh-aw normalizes a result."""
    results = grade_trace(trace if trace is not None else {}, plan or observed_plan(), evidence=evidence)
    for result in results:
        spec = registry.get(result["id"])
        result["implementation"] = {"id": IMPLEMENTATION_ID, "version": spec.revision if spec else 0}
    return results
