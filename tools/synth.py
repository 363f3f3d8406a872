"""Deterministic synthetic fleets for benchmarks and tests (``python -m tools.synth``).

A fleet is ``<out>/<workflow>/run-<id>[-attempt-2]/…`` holding every artifact kind of
docs/reference/graders.md §5. Run sizes are heavy-tailed (most runs small, a few with tens of thousands of
gateway lines and token-usage records, optionally a rare run near the 50 MiB file limit),
some tasks (issues) are rerun, and a few runs are malformed on purpose. Every random choice
comes from ``random.Random`` seeded with a string derived from the seed, so the same seed and
options give a byte-identical tree on every machine and Python process.
"""

from __future__ import annotations

import argparse
import difflib
import math
import random
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, NoReturn

import orjson

PROG = "python -m tools.synth"

WORKFLOWS: Final = (
    "ci-doctor", "issue-triage", "daily-file-diet", "pr-reviewer",
    "dependency-updater", "docs-writer", "test-fixer", "security-scan",
)
MODELS: Final = ("gpt-5", "claude-sonnet-4.5", "gpt-5-mini", "claude-opus-4.1")
# Each workflow is configured with one model (aw_info.json's `model`); a few calls go to another.
WORKFLOW_MODELS: Final = {
    "ci-doctor": "claude-sonnet-4.5", "issue-triage": "gpt-5-mini", "daily-file-diet": "gpt-5",
    "pr-reviewer": "claude-opus-4.1", "dependency-updater": "gpt-5-mini", "docs-writer": "claude-sonnet-4.5",
    "test-fixer": "gpt-5", "security-scan": "claude-sonnet-4.5",
}
# USD per million tokens: (fresh input, cache read, cache write, output and reasoning). AWF states each
# call's AI Credits (1 AIC = 0.01 USD) from such a table; the fleet's records carry them as it would.
PRICES: Final = {
    "gpt-5": (1.25, 0.125, 1.25, 10.0), "gpt-5-mini": (0.25, 0.025, 0.25, 2.0),
    "claude-sonnet-4.5": (3.0, 0.30, 3.75, 15.0), "claude-opus-4.1": (15.0, 1.5, 18.75, 75.0),
    "claude-haiku-4.5": (1.0, 0.10, 1.25, 5.0),
}
# The smaller model a workflow's subagents call now and then (a few calls of a run).
SUBAGENT_MODELS: Final = {"gpt-5": "gpt-5-mini", "gpt-5-mini": "claude-haiku-4.5",
                          "claude-sonnet-4.5": "claude-haiku-4.5", "claude-opus-4.1": "claude-haiku-4.5"}
ROUTER_MODEL: Final = "gpt-5-mini"
AWF_SCHEMA: Final = "token-usage/v0.28.50"
TOKEN_USAGE_DIRS: Final = (
    "sandbox/firewall-audit-logs/api-proxy-logs",
    "sandbox/firewall/audit/api-proxy-logs",
    "sandbox/firewall/logs/api-proxy-logs",
)
GATEWAY_NAMES: Final = ("gateway.jsonl", "mcp-gateway.jsonl", "rpc-messages.jsonl")
SESSION_DIR: Final = "sandbox/agent/logs/copilot-session-state"
# (server, tool) pairs the agent calls; `None` server = a native Copilot tool.
TOOLS: Final = (
    (None, "bash"), (None, "view"), (None, "edit"), (None, "create"), (None, "grep"),
    ("github", "list_issues"), ("github", "get_issue"), ("github", "get_workflow_run"),
    ("github", "search_code"), ("github", "get_file_contents"), ("safeoutputs", "add_comment"),
    ("safeoutputs", "create_pull_request"), ("playwright", "browser_navigate"),
)
SAFE_OUTPUT_TYPES: Final = ("add_comment", "add_labels", "create_issue", "create_pull_request", "update_issue")

# Malformed runs: the first group cannot be graded (dead letter), the second is graded with
# warnings (bad lines are skipped and counted).
DEAD_KINDS: Final = ("aw-info-truncated", "aw-info-not-object", "aw-info-bad-date", "aw-info-not-utf8", "no-artifacts")
WARN_KINDS: Final = ("truncated-jsonl", "not-utf8-jsonl", "null-lines", "empty-agent-output", "bad-agent-output")
MALFORMED_KINDS: Final = DEAD_KINDS + WARN_KINDS

MIB: Final = 1024 * 1024


@dataclass(frozen=True)
class SizeMix:
    """Fractions of medium and large runs; the rest are small."""

    medium: float = 0.15
    large: float = 0.02


@dataclass(frozen=True)
class RunSize:
    """How much one run logs."""

    tier: str  # small | medium | large | near-limit
    tool_calls: int
    token_records: int
    gateway_filler: int  # non-call gateway lines (debug logs, pings, notifications)
    near_limit_bytes: int = 0  # > 0: pad the gateway log to about this many bytes


def _lognormal_int(rng: random.Random, median: float, sigma: float, lo: int, hi: int) -> int:
    return max(lo, min(hi, round(median * math.exp(rng.gauss(0.0, sigma)))))


def sample_size(rng: random.Random, mix: SizeMix = SizeMix(), near_limit_rate: float = 0.0,
                max_file_mib: float = 48.0, spread: float = 1.0) -> RunSize:
    """One run's size from a heavy-tailed mixture (lognormal bodies, a large tier of 10k+ lines).

    Most runs make a dozen tool calls; medium runs hundreds; large runs thousands of calls with
    10k–60k gateway lines and 10k–40k token-usage records. With ``near_limit_rate`` > 0 a rare
    run pads its gateway log to ~``max_file_mib`` MiB (kept under gh-aw's 50 MiB limit).
    ``spread`` scales the lognormal bodies' spread (1: as drawn; 0.2: runs of one tier alike);
    the same draws are made whatever it is.
    """
    u = rng.random()
    if near_limit_rate > 0 and max_file_mib > 0 and rng.random() < near_limit_rate:
        calls = _lognormal_int(rng, 400, 0.5 * spread, 50, 3000)
        return RunSize("near-limit", calls, _lognormal_int(rng, 2000, 0.5 * spread, 100, 20000), 0,
                       int(min(max_file_mib, 49.5) * MIB * 0.97))
    if u < mix.large:
        calls = rng.randint(1500, 6000)
        return RunSize("large", calls, rng.randint(10_000, 40_000), rng.randint(10_000, 50_000))
    if u < mix.large + mix.medium:
        calls = _lognormal_int(rng, 150, 0.7 * spread, 20, 1500)
        return RunSize("medium", calls, _lognormal_int(rng, 200, 0.8 * spread, 10, 4000),
                       _lognormal_int(rng, 300, 0.9 * spread, 0, 8000))
    calls = _lognormal_int(rng, 12, 0.8 * spread, 0, 120)
    return RunSize("small", calls, _lognormal_int(rng, 14, 0.7 * spread, 1, 200),
                   _lognormal_int(rng, 6, 1.0 * spread, 0, 200))


# Graders a planted shift can move, and what it changes per run (EFFECT is added to it, or for
# ai-credits multiplies it):
SHIFTABLE: Final = {
    "tool-success-rate": "the per-call success probability (the grader's mean moves by about EFFECT)",
    "tool-failure-count": "the per-call failure probability (EFFECT > 0 is worse)",
    "retries": "the per-MCP-call retry probability (EFFECT > 0 is worse)",
    "ai-credits": "a factor on each model call's AI Credits (2 doubles the spend; calls and tokens stay)",
}
MAX_SPEND_FACTOR: Final = 1000.0
BASE_FAILURE: Final = 0.08
BASE_RETRY: Final = 0.05


@dataclass(frozen=True)
class Shift:
    """A planted change: runs of ``workflow`` dated ``date`` or later move ``grader`` by ``effect``."""

    workflow: str
    grader: str
    date: str
    effect: float

    @staticmethod
    def parse(text: str) -> Shift:
        """``WORKFLOW:GRADER:DATE:EFFECT``; raises ValueError with a message for the user."""
        parts = text.split(":")
        if len(parts) != 4:
            raise ValueError(f"--shift {text}: expected WORKFLOW:GRADER:DATE:EFFECT")
        workflow, grader, date, effect = parts
        if workflow not in WORKFLOWS:
            raise ValueError(f"--shift {text}: unknown workflow {workflow!r} (one of {', '.join(WORKFLOWS)})")
        if grader not in SHIFTABLE:
            raise ValueError(f"--shift {text}: grader {grader!r} cannot be shifted (one of {', '.join(SHIFTABLE)})")
        try:
            value = float(effect)
        except ValueError:
            value = math.nan
        if not valid_date(date) or not math.isfinite(value):
            raise ValueError(f"--shift {text}: DATE must be YYYY-MM-DD and EFFECT a number")
        if grader == "ai-credits":
            if not 0 < value <= MAX_SPEND_FACTOR:
                raise ValueError(f"--shift {text}: EFFECT must be a spend factor in (0, {MAX_SPEND_FACTOR:g}]")
        elif not -1 <= value <= 1:
            raise ValueError(f"--shift {text}: EFFECT must be a probability change in [-1, 1]")
        return Shift(workflow, grader, date, value)


def valid_date(text: str) -> bool:
    parts = text.split("-")
    if len(text) != 10 or len(parts) != 3 or not all(p.isascii() and p.isdigit() for p in parts):
        return False
    return _civil(_epoch_days(text)) == tuple(int(x) for x in parts)


def _probabilities(shifts: tuple[Shift, ...], workflow: str, date: str) -> tuple[float, float]:
    """(per-call failure, per-MCP-call retry) probabilities of a run after the planted shifts."""
    fail, retry = BASE_FAILURE, BASE_RETRY
    for s in shifts:
        if s.workflow != workflow or date < s.date:
            continue
        if s.grader == "tool-success-rate":
            fail -= s.effect
        elif s.grader == "tool-failure-count":
            fail += s.effect
        elif s.grader == "retries":
            retry += s.effect
    return min(1.0, max(0.0, fail)), min(1.0, max(0.0, retry))


def _workflow_model(workflow: str, drawn: str | None = None) -> str:
    """The model a workflow is configured with (``drawn``, a draw kept for the run's sequence, is
    unused)."""
    return WORKFLOW_MODELS.get(workflow, MODELS[0])


def _spend_factor(shifts: tuple[Shift, ...], workflow: str, date: str) -> float:
    """The planted factor on a run's AI Credits (1: none)."""
    factor = 1.0
    for s in shifts:
        if s.grader == "ai-credits" and s.workflow == workflow and date >= s.date:
            factor *= s.effect
    return factor


@dataclass(frozen=True)
class SynthOptions:
    runs: int
    seed: int = 0
    mix: SizeMix = SizeMix()
    near_limit_rate: float = 0.0
    max_file_mib: float = 48.0
    malformed_rate: float = 0.03
    rerun_rate: float = 0.06
    days: int = 5
    start_date: str = "2026-11-20"
    # > 0: run i draws its size and contents as run i mod shapes_every does, so a fleet N times
    # larger holds the same run shapes N times over (its largest run is no larger): for
    # measuring what the run count alone does (make bench memory). Ids, workflows, days,
    # reruns and malformed runs are still planned for the whole fleet.
    shapes_every: int = 0
    # Share of runs whose agent output embeds a Trajectory IR; ``ir_heavy`` IRs cover up to
    # _HEAVY_IR_CALLS of the run's calls (so they are as heavy-tailed as the runs, up to ~4,600
    # events, under the 5,000-item cap) and revisit a small set of states, as agents do.
    ir_rate: float = 0.3
    ir_heavy: bool = False
    # How runs spread over WORKFLOWS: run i's workflow is the int(Exp(skew))-th (capped at the
    # last); a smaller skew spreads runs over more workflows (a different workflow mix).
    workflow_skew: float = 0.45
    # Planted changes (--shift): runs they do not reach are byte-identical to the fleet without
    # them (each run draws from its own generator); a shifted run has the same size and calls.
    shifts: tuple[Shift, ...] = ()
    # The lognormal spread of run sizes (1: heavy-tailed as drawn; smaller: runs of a tier alike).
    size_spread: float = 1.0
    # Share of runs whose proxy states each call's AI Credits (the others are older AWF versions).
    credit_rate: float = 0.95


@dataclass(frozen=True)
class PlannedRun:
    index: int
    workflow: str
    run_id: int
    attempt: int
    issue: int
    day: int
    malformed: str | None

    @property
    def folder(self) -> str:
        suffix = f"-attempt-{self.attempt}" if self.attempt > 1 else ""
        return f"{self.workflow}/run-{self.run_id}{suffix}"


@dataclass
class SynthRun:
    """What was written for one run (the fleet manifest's entry)."""

    folder: str
    workflow: str
    run_id: int
    attempt: int
    tier: str
    malformed: str | None
    expected: str  # graded | dead_letter
    bytes: int = 0
    files: dict[str, int] = field(default_factory=dict)


def plan_fleet(opts: SynthOptions) -> list[PlannedRun]:
    """Identity of every run (workflow, id, attempt, issue, day, malformed kind), cheaply, up front."""
    rng = random.Random(f"fleetgrade-synth:{opts.seed}:fleet")
    n = opts.runs
    # At least one of every malformed kind once the fleet is large enough to hold them.
    n_bad = min(n, max(round(n * opts.malformed_rate), len(MALFORMED_KINDS) if n >= 4 * len(MALFORMED_KINDS) else 0))
    bad = dict(zip(sorted(rng.sample(range(n), n_bad)), (MALFORMED_KINDS[j % len(MALFORMED_KINDS)] for j in range(n_bad)),
                   strict=True))
    runs: list[PlannedRun] = []
    next_id = 8_000_000 + rng.randrange(1000) * 1000
    for i in range(n):
        prev = runs[-1] if runs else None
        if (prev is not None and prev.attempt == 1 and prev.malformed is None and i not in bad
                and rng.random() < opts.rerun_rate):
            # attempt 2 of the previous run: same id, workflow and issue, same day.
            runs.append(PlannedRun(i, prev.workflow, prev.run_id, 2, prev.issue, prev.day, None))
            continue
        wf = WORKFLOWS[min(len(WORKFLOWS) - 1, int(rng.expovariate(opts.workflow_skew)))]
        # Few open issues per workflow, so several runs share a task (pass^k groups them).
        issue = 100 + min(int(rng.paretovariate(1.2)) - 1, 400) + 1000 * WORKFLOWS.index(wf)
        next_id += rng.randint(1, 40)
        runs.append(PlannedRun(i, wf, next_id, 1, issue, rng.randrange(max(1, opts.days)), bad.get(i)))
    return _days_in_id_order(runs)


def _days_in_id_order(runs: list[PlannedRun]) -> list[PlannedRun]:
    """The same days, given out in run-id order: GitHub numbers runs as they start, so a later
    run never has an earlier id (an attempt 2 keeps its run's id and day)."""
    days = iter(sorted(r.day for r in runs if r.attempt == 1))
    out: list[PlannedRun] = []
    for r in runs:  # ids grow with the index
        day = next(days) if r.attempt == 1 else out[-1].day
        out.append(replace(r, day=day))
    return out


def _dumps(obj: Any) -> bytes:
    return orjson.dumps(obj)


def _ts(base_s: int, offset_s: float) -> str:
    t = base_s + int(offset_s)
    days, rem = divmod(t, 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    y, mo, d = _civil(days)
    return f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{m:02d}:{s:02d}Z"


def _civil(days: int) -> tuple[int, int, int]:
    """Days since 1970-01-01 → (year, month, day) (Howard Hinnant's algorithm; no tz/locale)."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return y + (m <= 2), m, d


def _epoch_days(date: str) -> int:
    y, m, d = (int(x) for x in date.split("-"))
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


_WORDS: Final = ("fix", "test", "build", "error", "module", "config", "retry", "cache", "parse", "label",
                 "issue", "review", "update", "docs", "deps", "lint", "timeout", "flaky", "runner", "token")


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _arguments(rng: random.Random, server: str | None, tool: str, issue: int) -> dict[str, Any]:
    if tool == "bash":
        return {"command": rng.choice(("make test", "pytest -q", "git status", "npm ci", "ls -la", "cat README.md"))}
    if tool in ("view", "edit", "create"):
        args: dict[str, Any] = {"path": f"src/module_{rng.randrange(40)}.py"}
        if tool != "view":
            args["content"] = _text(rng, rng.randint(3, 30))
        return args
    if tool == "grep":
        return {"pattern": rng.choice(_WORDS), "path": "src"}
    if server == "github":
        return {"owner": "octo-org", "repo": "widgets", "issue_number": issue}
    if server == "safeoutputs":
        return {"body": _text(rng, rng.randint(5, 40))}
    return {"url": f"https://example.com/{rng.randrange(100)}"}


@dataclass
class _Call:
    index: int
    server: str | None
    tool: str
    args: dict[str, Any]
    success: bool
    call_id: str
    t: float
    duration_ms: int


def _calls(rng: random.Random, size: RunSize, run_id: int, issue: int, fail: float = BASE_FAILURE) -> list[_Call]:
    calls = []
    t = 0.0
    prev: _Call | None = None
    for i in range(size.tool_calls):
        if prev is not None and rng.random() < 0.04:  # a loop: the same call again
            server, tool, args = prev.server, prev.tool, prev.args
        else:
            server, tool = TOOLS[min(len(TOOLS) - 1, int(rng.expovariate(0.25)))]
            args = _arguments(rng, server, tool, issue)
        dur = _lognormal_int(rng, 400, 1.0, 5, 120_000)
        t += rng.uniform(0.5, 20.0)
        call = _Call(i, server, tool, args, rng.random() > fail, f"call_{run_id}_{i}", t, dur)
        calls.append(call)
        prev = call
    return calls


@dataclass
class _Spend:
    """How a run's model calls are billed, drawn from the run's own cost generator (so the other
    artifacts are drawn as before), and the sums ``agent_usage.json`` reports of them."""

    rng: random.Random
    model: str  # the workflow's model
    credits: bool  # the proxy states AI Credits (AWF with the AI Credits guard)
    factor: float = 1.0  # a planted shift's factor on each call's credits
    router: bool = False  # the model router's classifier call comes first
    sums: Counter[str] = field(default_factory=Counter)
    total: float = 0.0
    by_model: Counter[str] = field(default_factory=Counter)

    def record(self, rec: dict[str, Any], model: str, context: int, cached: int, out: int) -> dict[str, Any]:
        """``rec`` with the call's token classes (a prompt of ``context`` tokens, ``cached`` of them
        read from the cache) as ``model``'s provider counts them, and its AI Credits."""
        rng = self.rng
        gpt = model.startswith("gpt")
        if gpt:  # OpenAI counts cached tokens inside input_tokens, in 128-token blocks, and no writes
            read, write, fresh = (min(cached, context) // 128) * 128, 0, context - (min(cached, context) // 128) * 128
            rec.update(input_tokens=context, output_tokens=out, cache_read_tokens=read, cache_write_tokens=0,
                       reasoning_tokens=int(out * rng.uniform(0.5, 1.5)) if model.startswith("gpt-5") else 0)
        else:  # Anthropic: input_tokens is the fresh part; the new prefix is written to the cache
            fresh = rng.randint(1, 400)
            read = min(cached, max(0, context - fresh))
            write = max(0, context - fresh - read)
            rec.update(input_tokens=fresh, output_tokens=out, cache_read_tokens=read, cache_write_tokens=write)
        for key in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens"):
            self.sums[key] += rec.get(key, 0)
        if self.credits:
            p_in, p_read, p_write, p_out = PRICES[model]
            usd = (fresh * p_in + read * p_read + write * p_write + (out + rec.get("reasoning_tokens", 0)) * p_out) / 1e6
            delta = round(usd / 0.01 * self.factor, 6)
            self.total = round(self.total + delta, 6)
            self.by_model[model] += delta
            rec.update(ai_credits_this_response=delta, ai_credits_total=self.total)
        return rec


def _token_lines(rng: random.Random, size: RunSize, base_s: int, spend: _Spend) -> Iterator[bytes]:
    """AWF's token-usage records: a prompt growing call by call (compacted now and then), read
    from the cache as the provider caches it, billed by ``spend`` (its own generator: the run's
    draws are made in the same order whatever it does)."""
    rng.choice(MODELS)  # the draw that once chose the model: the workflow's model is used now
    model = spend.model
    context = rng.randint(2000, 12000)
    cached = 0
    t = 0.0
    if spend.router:  # the model router's classifier call, before the agent's first
        router = {"_schema": AWF_SCHEMA, "timestamp": _ts(base_s, 0.5), "event": "token_usage",
                  "request_id": "req_router", "purpose": "routing_classification", "provider": "copilot",
                  "model": ROUTER_MODEL, "path": "/responses", "status": 200}
        spend.record(router, ROUTER_MODEL, spend.rng.randint(600, 1200), 0, spend.rng.randint(40, 300))
        router["duration_ms"] = spend.rng.randint(800, 4000)
        yield _dumps(router)
    for i in range(size.token_records):
        context += rng.randint(0, 1500)
        if rng.random() < 0.02:  # compaction
            context = rng.randint(4000, 20000)
            cached = 0
        out = rng.randint(20, 2000)
        t += rng.uniform(1.0, 30.0)
        call_model = model
        if rng.random() <= 0.03:  # a subagent's call now and then
            rng.choice(MODELS)  # the draw that once chose its model, kept for the run's sequence
            call_model = SUBAGENT_MODELS[model]
        rec: dict[str, Any] = {"timestamp": _ts(base_s, t), "request_id": f"req_{i:06d}", "provider": "copilot",
                               "model": call_model}
        duration = _lognormal_int(rng, 2500, 0.6, 50, 300_000)
        as_text = rng.random() < 0.01  # older proxies logged numbers as strings
        rec = {"_schema": AWF_SCHEMA, "timestamp": rec["timestamp"], "event": "token_usage",
               "request_id": rec["request_id"], "purpose": "", "provider": "copilot", "model": call_model,
               "path": "/responses" if call_model.startswith("gpt") else "/v1/messages", "status": 200}
        spend.record(rec, call_model, context, cached, out)
        rec["duration_ms"] = duration
        if as_text:
            rec["input_tokens"] = str(rec["input_tokens"])
        cached = context  # the next call reads this prompt from the cache
        yield _dumps(rec)


def _gateway_lines(rng: random.Random, calls: list[_Call], size: RunSize, fmt: str, base_s: int,
                   retry: float = BASE_RETRY) -> Iterator[bytes]:
    """Gateway log: one request (+ response) per MCP call, retries, errors and filler lines."""
    mcp_calls = [c for c in calls if c.server is not None]
    filler_left = size.gateway_filler
    per_call = filler_left / max(1, len(mcp_calls))
    pad = ""
    if size.near_limit_bytes:
        # Large tool payloads (file contents) bring the log near the file limit with few lines.
        per_line = 8192
        n_lines = max(1, size.near_limit_bytes // (per_line + 200))
        pad = _text(rng, per_line // 6)[:per_line]
        per_call = n_lines / max(1, len(mcp_calls))
    budget = 0.0
    for c in mcp_calls:
        ts = _ts(base_s, c.t)
        if fmt == "rpc-messages.jsonl":
            yield _dumps({"timestamp": ts, "direction": "OUT", "type": "request", "method": "tools/call",
                          "server_id": c.server, "payload": {"jsonrpc": "2.0", "id": c.index, "method": "tools/call",
                                                             "params": {"name": c.tool, "arguments": c.args}}})
        else:
            yield _dumps({"timestamp": ts, "level": "info", "type": "tool_call", "server_id": c.server,
                          "tool_name": c.tool, "payload": {"arguments": c.args}})
        if rng.random() < retry:
            yield _dumps({"timestamp": ts, "level": "warn", "event": "retry",
                          "message": f"Retrying {c.tool} after HTTP 429 (attempt 2)", "server_id": c.server})
        if not c.success and rng.random() < 0.5:
            yield _dumps({"timestamp": ts, "level": "error", "type": "error", "server_id": c.server,
                          "message": "upstream timeout"})
        yield _dumps({"timestamp": ts, "type": "response", "method": "tools/call", "server_id": c.server,
                      "status": 200 if c.success else 502, "duration_ms": c.duration_ms})
        budget += per_call
        while budget >= 1:
            budget -= 1
            if pad:
                yield _dumps({"timestamp": ts, "level": "debug", "type": "payload", "server_id": c.server,
                              "message": "tool result", "content": pad})
            else:
                yield _dumps({"timestamp": ts, "level": "debug", "type": "log", "server_id": c.server,
                              "message": f"{rng.choice(_WORDS)} {rng.choice(_WORDS)} ok", "seq": rng.randrange(10**6)})
    if not mcp_calls:
        for _ in range(filler_left):
            yield _dumps({"level": "debug", "type": "ping", "message": "keepalive"})


def _event_lines(rng: random.Random, calls: list[_Call], run_id: int, base_s: int) -> Iterator[bytes]:
    """Copilot session events: start/complete pairs, mostly by toolCallId, some only by name (FIFO)."""
    yield _dumps({"type": "session.start", "data": {"sessionId": f"s-{run_id}", "version": 1},
                  "timestamp": _ts(base_s, 0)})
    yield _dumps({"type": "user.message", "data": {"content": _text(rng, 20)}, "timestamp": _ts(base_s, 0)})
    for c in calls:
        ts = _ts(base_s, c.t)
        data: dict[str, Any] = {"toolCallId": c.call_id, "toolName": c.tool if c.server is None else f"{c.server}-{c.tool}",
                                "arguments": c.args}
        if c.server is not None:
            data["mcpServerName"] = c.server
            data["mcpToolName"] = c.tool
        yield _dumps({"type": "tool.execution_start", "data": data, "timestamp": ts})
        done: dict[str, Any] = {"toolCallId": c.call_id, "success": c.success}
        if rng.random() < 0.05:  # completion without an id: matched FIFO by name
            done = {"toolName": data["toolName"], "success": c.success}
        if c.success:
            done["result"] = {"content": _text(rng, rng.randint(2, 25))}
        else:
            done["error"] = {"message": "command failed", "code": rng.choice(("ENOENT", "EXIT_1", "TIMEOUT"))}
        if rng.random() > 0.01:  # a few calls never complete
            yield _dumps({"type": "tool.execution_complete", "data": done, "timestamp": ts})
        if rng.random() < 0.1:
            yield _dumps({"type": "assistant.message", "data": {"content": _text(rng, rng.randint(5, 60))},
                          "timestamp": ts})
    yield _dumps({"type": "session.end", "data": {"reason": "complete"}, "timestamp": _ts(base_s, calls[-1].t if calls else 1)})


_HEAVY_IR_CALLS: Final = 2000


def _trajectory_ir(rng: random.Random, calls: list[_Call], run_id: int, items: list[dict[str, Any]],
                   heavy: bool = False) -> dict[str, Any]:
    """A Trajectory IR (docs/reference/graders.md §12) consistent with the run's first tool calls."""
    events: list[dict[str, Any]] = []
    tool_calls: list[dict[str, Any]] = []
    observations: list[dict[str, Any]] = []
    actions: list[dict[str, Any]] = []
    resources: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    states = [{"id": "s0", "label": "start", "firstEventIndex": 0}]
    paths: dict[str, str] = {}
    for c in calls[: _HEAVY_IR_CALLS if heavy else 60]:
        ei = len(events)
        events.append({"index": ei, "kind": "tool_call", "timestamp": f"t+{c.t:.1f}s", "ref": f"tc{c.index}"})
        tool_calls.append({"id": f"tc{c.index}", "eventIndex": ei, "name": c.tool, "arguments": c.args,
                           "success": c.success, "durationMs": c.duration_ms, "outputRef": f"ob{c.index}"})
        events.append({"index": ei + 1, "kind": "observation", "timestamp": f"t+{c.t:.1f}s", "ref": f"ob{c.index}"})
        observations.append({"id": f"ob{c.index}", "eventIndex": ei + 1, "sourceToolCallId": f"tc{c.index}",
                             "consumedByActionIds": []})
        path = c.args.get("path")
        if isinstance(path, str) and path not in paths:
            paths[path] = f"res{len(paths)}"
            resources.append({"id": paths[path], "kind": "file", "uri": path})
        if c.tool in ("edit", "create"):
            aid = f"act{len(actions)}"
            actions.append({"id": aid, "eventIndex": ei, "type": "edit_file", "target": path,
                            "validAtIssueTime": True, "consequential": True})
            if observations[:-1]:
                src = observations[-2]
                src["consumedByActionIds"].append(aid)
                edges.append({"from": src["id"], "to": aid, "relation": "informed"})
        if heavy and rng.random() < 0.3:  # a few phases, each entered again and again
            label = rng.choice(("explore", "edit", "verify", "report"))
            states.append({"id": f"{label}-{rng.randrange(3)}", "label": label, "firstEventIndex": len(events)})
            events.append({"index": len(events), "kind": "state_change", "timestamp": f"t+{c.t:.1f}s",
                           "ref": states[-1]["id"]})
        elif not heavy and rng.random() < 0.15:
            states.append({"id": f"s{len(states)}", "label": rng.choice(("explore", "edit", "verify", "report")),
                           "firstEventIndex": len(events)})
            events.append({"index": len(events), "kind": "state_change", "timestamp": f"t+{c.t:.1f}s",
                           "ref": states[-1]["id"]})
    for k, item in enumerate(items):
        aid = f"so{k}"
        events.append({"index": len(events), "kind": "safe_output", "timestamp": "end", "ref": aid})
        actions.append({"id": aid, "eventIndex": len(events) - 1, "type": item["type"], "target": None,
                        "validAtIssueTime": rng.random() > 0.1, "consequential": item["type"] != "add_labels"})
        if tool_calls:
            edges.append({"from": tool_calls[-1]["id"], "to": aid, "relation": "required-for"})
    objectives: list[dict[str, Any]] = [{"id": "obj0", "description": "diagnose the failure",
                   "satisfiedAtEventIndex": (len(events) // 2) if events and rng.random() > 0.2 else None,
                   "dependsOn": []}]
    if rng.random() < 0.5:
        objectives.append({"id": "obj1", "description": "report back on the issue",
                           "satisfiedAtEventIndex": (len(events) - 1) if events and rng.random() > 0.3 else None,
                           "dependsOn": ["obj0"]})
    reference = None
    if rng.random() < 0.5:
        reference = {"toolCalls": [{"name": c.tool, "arguments": c.args} for c in calls[: min(5, len(calls))]],
                     "states": [s["id"] for s in states[:3]],
                     "patch": {"files": [{"path": p} for p in list(paths)[:3]]}}
    return {"runId": str(run_id), "events": events, "states": states, "actions": actions, "toolCalls": tool_calls,
            "observations": observations, "resources": resources, "provenanceEdges": edges,
            "objectives": objectives, "reference": reference}


class _Writer:
    def __init__(self, root: Path, entry: SynthRun) -> None:
        self.root = root
        self.entry = entry

    def write(self, rel: str, data: bytes) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        self.entry.files[rel] = len(data)
        self.entry.bytes += len(data)

    def write_lines(self, rel: str, lines: Iterator[bytes], corrupt: str | None = None,
                    rng: random.Random | None = None) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        n = 0
        with open(path, "wb") as fh:
            chunk: list[bytes] = []
            for i, line in enumerate(lines):
                if corrupt is not None and rng is not None and i > 0 and rng.random() < 0.05:
                    if corrupt == "truncated-jsonl":
                        line = line[: max(1, len(line) // 2)]
                    elif corrupt == "not-utf8-jsonl":
                        line = line[:-1] + b', "note": "caf\xe9 \xff\xfe"}' if line.endswith(b"}") else line
                    elif corrupt == "null-lines":
                        chunk.append(b"null")
                chunk.append(line)
                if len(chunk) >= 4096:
                    data = b"\n".join(chunk) + b"\n"
                    fh.write(data)
                    n += len(data)
                    chunk = []
            if corrupt == "truncated-jsonl" and chunk:  # the log was cut mid-record
                chunk[-1] = chunk[-1][: max(1, len(chunk[-1]) * 2 // 3)]
                data = b"\n".join(chunk)
            else:
                data = b"\n".join(chunk) + b"\n" if chunk else b""
            fh.write(data)
            n += len(data)
        self.entry.files[rel] = n
        self.entry.bytes += n


def synth_run(out: Path, run: PlannedRun, opts: SynthOptions) -> SynthRun:
    """Write one run's folder under ``out``; returns its manifest entry."""
    shape = run.index % opts.shapes_every if opts.shapes_every > 0 else run.index
    rng = random.Random(f"fleetgrade-synth:{opts.seed}:run:{shape}")
    size = sample_size(rng, opts.mix, opts.near_limit_rate, opts.max_file_mib, opts.size_spread)
    kind = run.malformed
    entry = SynthRun(run.folder, run.workflow, run.run_id, run.attempt, size.tier, kind,
                     "dead_letter" if kind in DEAD_KINDS else "graded")
    w = _Writer(out / run.folder, entry)
    base_s = _epoch_days(opts.start_date) * 86400 + (run.day * 86400) + rng.randrange(0, 20 * 3600)
    if run.attempt > 1:
        base_s += 3600  # the rerun starts an hour later; same day in all but rare cases
        base_s = min(base_s, (base_s // 86400) * 86400 + 86399)

    if kind == "no-artifacts":
        w.write("notes.txt", b"the artifact download failed\n")
        return entry

    aw_info: dict[str, Any] = {
        "workflow_name": run.workflow, "run_id": run.run_id, "run_number": run.run_id % 100000,
        "run_attempt": run.attempt, "created_at": _ts(base_s, 0), "repository": "octo-org/widgets",
        "event_name": "issues", "issue_number": run.issue, "engine_id": "copilot",
        "engine_name": "GitHub Copilot CLI", "model": _workflow_model(run.workflow, rng.choice(MODELS)), "version": "1.0.55",
        "cli_version": "v0.40.1", "staged": False, "agent_runtime": "node",
    }
    if kind == "aw-info-bad-date":
        aw_info["created_at"] = "last tuesday"
    info_bytes = orjson.dumps(aw_info, option=orjson.OPT_INDENT_2)
    if kind == "aw-info-truncated":
        info_bytes = info_bytes[: len(info_bytes) // 2]
    elif kind == "aw-info-not-object":
        info_bytes = orjson.dumps([aw_info])
    elif kind == "aw-info-not-utf8":
        info_bytes = info_bytes.replace(b'"octo-org/widgets"', b'"octo-org/w\xefdgets\xff"')
    # Older runs stored the activation artifact under its artifact name.
    w.write("aw-info/aw_info.json" if rng.random() < 0.1 else "aw_info.json", info_bytes)

    y, mo, d = _civil(base_s // 86400)
    fail, retry = _probabilities(opts.shifts, run.workflow, f"{y:04d}-{mo:02d}-{d:02d}")
    calls = _calls(rng, size, run.run_id, run.issue, fail)
    corrupt = kind if kind in ("truncated-jsonl", "not-utf8-jsonl", "null-lines") else None

    token_dir = TOKEN_USAGE_DIRS[0 if rng.random() < 0.7 else (1 if rng.random() < 0.6 else 2)]
    crng = random.Random(f"fleetgrade-synth:{opts.seed}:cost:{shape}")
    spend = _Spend(crng, _workflow_model(run.workflow), crng.random() < opts.credit_rate,
                   _spend_factor(opts.shifts, run.workflow, f"{y:04d}-{mo:02d}-{d:02d}"), crng.random() < 0.4)
    w.write_lines(f"{token_dir}/token-usage.jsonl", _token_lines(rng, size, base_s, spend),
                  corrupt if corrupt == "null-lines" else None, rng)
    if token_dir != TOKEN_USAGE_DIRS[2] and rng.random() < 0.05:  # a stale lower-priority copy
        w.write_lines(f"{TOKEN_USAGE_DIRS[2]}/token-usage.jsonl", iter([b'{"input_tokens": 1}']))

    if rng.random() < 0.9:  # gh-aw's sums of the records (parse_token_usage.cjs), router included
        usage: dict[str, Any] = {k: spend.sums[k] for k in ("input_tokens", "output_tokens", "cache_read_tokens",
                                                          "cache_write_tokens")}
        if spend.credits:
            usage["ai_credits"] = spend.total
        usage["primary_model"] = spend.model
        w.write("agent_usage.json", orjson.dumps(usage, option=orjson.OPT_INDENT_2))

    gw = GATEWAY_NAMES[0] if rng.random() < 0.75 else GATEWAY_NAMES[1 if rng.random() < 0.5 else 2]
    w.write_lines(f"mcp-logs/{gw}", _gateway_lines(rng, calls, size, gw, base_s, retry),
                  corrupt if corrupt in ("truncated-jsonl", "not-utf8-jsonl") else None, rng)

    if calls and rng.random() < 0.85:
        # Sub-agents log into one-level sub-session folders.
        if rng.random() < 0.2 and len(calls) > 4:
            cut = len(calls) // 3
            w.write_lines(f"{SESSION_DIR}/events.jsonl", _event_lines(rng, calls[:cut], run.run_id, base_s))
            w.write_lines(f"{SESSION_DIR}/sub-{run.run_id}-1/events.jsonl",
                          _event_lines(rng, calls[cut:], run.run_id, base_s), corrupt, rng)
        else:
            w.write_lines(f"{SESSION_DIR}/events.jsonl", _event_lines(rng, calls, run.run_id, base_s), corrupt, rng)

    items = [{"type": rng.choice(SAFE_OUTPUT_TYPES), "body": _text(rng, rng.randint(5, 80))}
             for _ in range(rng.randint(0, 4))]
    output: dict[str, Any] = {"items": items, "errors": []}
    if rng.random() < 0.2:
        output["files"] = [{"path": f"src/module_{rng.randrange(40)}.py"} for _ in range(rng.randint(1, 5))]
    if rng.random() < opts.ir_rate:
        output["trajectoryIR" if rng.random() < 0.85 else "trajectoryIr"] = _trajectory_ir(
            rng, calls, run.run_id, items, opts.ir_heavy)
    out_bytes = orjson.dumps(output, option=orjson.OPT_INDENT_2)
    if kind == "empty-agent-output":
        out_bytes = b""
    elif kind == "bad-agent-output":
        out_bytes = out_bytes[: len(out_bytes) // 2]
    w.write("agent-output/agent_output.json" if rng.random() < 0.05 else "agent_output.json", out_bytes)

    if rng.random() < 0.3:
        evals = [_dumps({"id": f"q{k}", "question": _text(rng, 6), "answer": rng.choice(("YES", "NO", "yes", "maybe"))})
                 for k in range(rng.randint(1, 5))]
        w.write("evals.jsonl", b"\n".join(evals) + b"\n")
    return entry


def synth_options(opts: SynthOptions) -> dict[str, Any]:
    """The options that shape a fleet (besides seed and size), as the manifest records them."""
    return {"medium": opts.mix.medium, "large": opts.mix.large, "near_limit_rate": opts.near_limit_rate,
            "max_file_mib": opts.max_file_mib, "malformed_rate": opts.malformed_rate,
            "rerun_rate": opts.rerun_rate, "days": opts.days, "start_date": opts.start_date,
            "ids_follow_days": True, "shapes_every": opts.shapes_every,
            # Only when set: fleets generated before these options keep their recorded options.
            **({"ir_rate": opts.ir_rate, "ir_heavy": opts.ir_heavy}
               if (opts.ir_rate, opts.ir_heavy) != (0.3, False) else {}),
            **({"workflow_skew": opts.workflow_skew} if opts.workflow_skew != 0.45 else {}),
            **({"shifts": [f"{s.workflow}:{s.grader}:{s.date}:{s.effect:g}" for s in opts.shifts]}
               if opts.shifts else {}),
            **({"size_spread": opts.size_spread} if opts.size_spread != 1.0 else {}),
            "credit_rate": opts.credit_rate}


def synth_fleet(out: Path, opts: SynthOptions) -> list[SynthRun]:
    """Write the whole fleet under ``out`` (which should be empty) and its ``synth-manifest.json``."""
    out.mkdir(parents=True, exist_ok=True)
    entries = [synth_run(out, run, opts) for run in plan_fleet(opts)]
    manifest = {
        "seed": opts.seed, "runs": opts.runs,
        "options": synth_options(opts),
        "fleet": [
            {"folder": e.folder, "workflow": e.workflow, "run_id": e.run_id, "attempt": e.attempt, "tier": e.tier,
             "malformed": e.malformed, "expected": e.expected, "bytes": e.bytes}
            for e in entries
        ],
    }
    # A top-level file belongs to no run: discovery counts it as a stray file and skips it.
    (out / MANIFEST).write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    return entries


MANIFEST: Final = "synth-manifest.json"


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """One line for a mistake (argparse prints the whole usage), no abbreviated flags, and the
    closest flag for an unknown one, as fleetgrade's own commands do."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_abbrev=False, **kwargs)

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        # An unknown flag first: argparse would report a required flag it hides (--rnus: "--runs required").
        flags = [o for a in self._actions for o in a.option_strings]
        for token in sys.argv[1:] if args is None else args:
            if token == "--":
                break
            name = token.split("=", 1)[0]
            if name.startswith("--") and name not in flags:
                close = difflib.get_close_matches(name, flags, n=1)
                raise _UsageError(f"unknown flag {name}" + (f"; did you mean {close[0]}?" if close else ""))
        return super().parse_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m tools.synth",
        description="Writes <out>/<workflow>/run-<id>/… with every gh-aw artifact kind, plus "
        "synth-manifest.json. The same --seed and options give a byte-identical tree.",
    )
    p.add_argument("--runs", type=int, required=True, help="number of run folders")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="output folder (must be empty or absent)")
    p.add_argument("--medium-fraction", type=float, default=SizeMix.medium, help="fraction of medium runs")
    p.add_argument("--large-fraction", type=float, default=SizeMix.large,
                   help="fraction of large runs (10k+ gateway lines and token records)")
    p.add_argument("--near-limit-rate", type=float, default=0.0,
                   help="fraction of runs whose gateway log is padded to about --max-file-mib (default 0: none)")
    p.add_argument("--max-file-mib", type=float, default=48.0, help="size of near-limit files (at most 49.5)")
    p.add_argument("--malformed-rate", type=float, default=0.03, help="fraction of deliberately malformed runs")
    p.add_argument("--rerun-rate", type=float, default=0.06, help="fraction of runs that get an attempt 2")
    p.add_argument("--days", type=int, default=5, help="spread created_at over this many dates")
    p.add_argument("--shapes-every", type=int, default=0, metavar="N",
                   help="run i repeats the size and contents of run i mod N (default 0: every run drawn "
                   "anew); a larger fleet then differs in run count only")
    p.add_argument("--start-date", default=SynthOptions.start_date, help="first date of the fleet (YYYY-MM-DD)")
    p.add_argument("--size-spread", type=float, default=1.0, metavar="S",
                   help="scale the lognormal spread of run sizes (default 1; 0.2: runs of one tier alike)")
    p.add_argument("--credit-rate", type=float, default=SynthOptions.credit_rate, metavar="R",
                   help="share of runs whose proxy states each call's AI Credits (default 0.95; 0: a fleet "
                   "without credit fields)")
    p.add_argument("--workflow-skew", type=float, default=SynthOptions.workflow_skew, metavar="RATE",
                   help="how runs spread over the workflows: smaller spreads them over more (default 0.45)")
    p.add_argument("--shift", action="append", default=[], metavar="WORKFLOW:GRADER:DATE:EFFECT",
                   help="plant a change: runs of WORKFLOW from DATE on get EFFECT added to "
                   + "; ".join(f"{g}: {what}" for g, what in SHIFTABLE.items()) + " (repeatable)")
    return p


def main(argv: list[str] | None = None) -> int:
    """``python -m tools.synth``: write a deterministic synthetic fleet (benchmarks, load tests)."""
    try:
        args = _parser().parse_args(argv)
    except _UsageError as exc:
        print(f"{PROG}: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    out = Path(args.out)
    problem = None
    if args.runs < 0:
        problem = "--runs must be >= 0"
    elif args.shapes_every < 0:
        problem = "--shapes-every must be >= 0"
    elif not args.workflow_skew > 0:
        problem = "--workflow-skew must be > 0"
    elif not valid_date(args.start_date):
        problem = f"--start-date must be YYYY-MM-DD, got {args.start_date!r}"
    elif not (math.isfinite(args.size_spread) and 0 <= args.size_spread <= 10):
        problem = f"--size-spread must be in [0, 10], got {args.size_spread}"
    elif not 0 <= args.credit_rate <= 1:
        problem = f"--credit-rate must be in [0, 1], got {args.credit_rate}"
    try:
        shifts = tuple(Shift.parse(text) for text in args.shift)
    except ValueError as exc:
        problem = problem or str(exc)
    if problem is not None:
        print(f"{PROG}: {problem}", file=sys.stderr)
        return 2
    if out.exists() and any(out.iterdir()):
        print(f"{PROG}: {out}: not empty; refusing to mix fleets", file=sys.stderr)
        return 1
    opts = SynthOptions(
        runs=args.runs, seed=args.seed, mix=SizeMix(args.medium_fraction, args.large_fraction),
        near_limit_rate=args.near_limit_rate, max_file_mib=args.max_file_mib,
        malformed_rate=args.malformed_rate, rerun_rate=args.rerun_rate, days=args.days,
        shapes_every=args.shapes_every, start_date=args.start_date, shifts=shifts, workflow_skew=args.workflow_skew,
        size_spread=args.size_spread, credit_rate=args.credit_rate,
    )
    entries = synth_fleet(out, opts)
    tiers = Counter(e.tier for e in entries)
    dead = sum(e.expected == "dead_letter" for e in entries)
    total = sum(e.bytes for e in entries)
    print(f"wrote {len(entries)} run(s), {total / 1e6:.1f} MB under {out}: "
          + ", ".join(f"{n} {t}" for t, n in sorted(tiers.items()))
          + f"; {sum(e.malformed is not None for e in entries)} malformed ({dead} to be dead-lettered)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
