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
# Model families whose ``input_tokens`` already include cached tokens (docs/formats.md §1.4).
_CACHE_INCLUSIVE_PREFIXES: Final = ("gpt", "o1", "o3", "o4", "codex", "chatgpt")

Raw = dict[str, Any] | None
ObservedFn = Callable[[RunEvidence, Mapping[str, Any]], Raw]


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


def _model_counts_cache(model: str) -> bool | None:
    """Whether a model's ``input_tokens`` count its cached tokens: True for GPT-family models,
    False for Claude, None when only the record's own counts can tell."""
    model = model.lower()
    if model.startswith("claude"):
        return False
    if model.startswith(_CACHE_INCLUSIVE_PREFIXES) or "gpt-" in model:
        return True
    return None


def cache_inclusive(record: TokenRecord) -> bool:
    """Whether the record's ``input_tokens`` already count its cached tokens: GPT-family models
    yes, Claude no; another model yes unless its cache counts exceed its input (which only a
    cache-exclusive count can)."""
    known = _model_counts_cache(record.model)
    return record.cache_read + record.cache_write <= record.input if known is None else known


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
    known = {m: _model_counts_cache(m) for m in {r.model for r in records}}
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


# --- registration and grading -----------------------------------------------------------------


class _OnEvidence:
    """A registry grader function (trace, ctx) that grades ``ctx.evidence`` with ``ctx.config``."""

    def __init__(self, fn: ObservedFn) -> None:
        self.fn = fn

    def __call__(self, trace: dict[str, Any], ctx: GraderContext) -> Raw:
        evidence = ctx.evidence if isinstance(ctx.evidence, RunEvidence) else RunEvidence()
        config = ctx.config if isinstance(ctx.config, Mapping) else {}
        return self.fn(evidence, config)


def _observed(gid: str, name: str, description: str, unit: str, direction: Direction,
              threshold: float | None = None, lo: float | None = None, hi: float | None = None) -> None:
    """Register the pure ``(RunEvidence, config)`` function of ``gid`` as a grader of source
    ``fleetgrade``, family ``observed``: one description, graded beside every plan."""
    grader = registry.grader(gid, name=name, description=description, unit=unit, direction=direction,
                             family=OBSERVED, threshold=threshold, min=lo, max=hi, source=SOURCE)
    grader(_OnEvidence(_FUNCTIONS[gid]))


_FUNCTIONS: Final[dict[str, ObservedFn]] = {
    "run-conclusion": run_conclusion,
    "mcp-tool-error-count": mcp_tool_error_count,
    "mcp-tool-success-rate": mcp_tool_success_rate,
    "safe-output-error-count": safe_output_error_count,
    "tool-call-count": tool_call_count,
    "tool-error-count": tool_error_count,
    "context-growth-cached": context_growth_cached,
    "working-set-rebuild-factor-cached": working_set_rebuild_factor_cached,
}

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
          "factor", "lower_is_better")
_observed("working-set-rebuild-factor-cached", "Working-Set Rebuild Factor (cache-aware)",
          "working-set-rebuild-factor over input + cache read + cache write tokens, router/classifier calls excluded",
          "factor", "lower_is_better", lo=1)
_observed("tool-call-count", "Tool Call Count",
          "every tool call the run's logs show, the engine's native calls and MCP calls, each call id once",
          "count", "lower_is_better")
_observed("tool-error-count", "Tool Error Count",
          "tool calls that failed: an error flag, a non-zero exit code, a failed or declined status, a sandbox refusal",
          "count", "lower_is_better", 5)


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
