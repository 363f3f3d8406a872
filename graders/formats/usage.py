"""What a run's model calls cost, as its own logs report it: the cost graders' input.

One :func:`read_usage` per run (called by ``evidence.read_evidence``) finds, in order of
preference (docs/observed-graders.md, "Cost"):

* per-call records: AWF's api-proxy ``token-usage.jsonl`` (every candidate file of the run, in
  docs/reference/graders.md §5's order, deduplicated as gh-aw deduplicates them), else the unified session's
  ``firewall.token_usage`` events, else its ``usage.report`` events with a ``usage``;
* run totals where no per-call record exists: ``agent_usage.json`` (gh-aw's sums of those records);
* AI Credits (AIC) as the records state them: AWF's ``ai_credits_this_response`` /
  ``ai_credits_total`` (or the session's ``aic`` / ``totalAic``) under gh-aw's rule (its ADR
  "Use Authoritative AWF AI-Credit Totals", ai-credits-specification §7): in time order, the last
  valid cumulative total extended by the per-call figures after it; else the unified session's
  ``usage.report`` total; else ``usage/activity/summary.json``'s ``friction.total_run_aic``.
  Never priced from tokens: a run whose logs state no figure has no credits.

Token classes are disjoint, so they add up: ``input`` is the input read fresh, without the cached
tokens a cache-inclusive count holds (``input_tokens_include_cache``, else the model family: GPT
models count cached tokens inside ``input_tokens``, Claude models apart; :func:`includes_cache`).
Which calls are the agent's (router/classifier calls are counted apart) is the grader's
configuration: :func:`call_totals` takes the purposes to set aside.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

from graders.jsrt.jsonio import JsonError, parse_json

if TYPE_CHECKING:
    from graders.runs.runfiles import RunFiles

AGENT_USAGE: Final = "agent_usage.json"  # artifact root (usage/agent_usage.json maps here)
ACTIVITY_SUMMARY: Final = "usage/activity/summary.json"
ACTIVITY_SCHEMA: Final = "usage-activity-summary/v1"
# Unified-session events that hold one model call's usage (UsageReportData, unified_session.d.ts).
SESSION_USAGE_EVENTS: Final = ("firewall.token_usage", "usage.report")
# Model families whose ``input_tokens`` count cached tokens (docs/formats.md §1.4).
_CACHE_INCLUSIVE_PREFIXES: Final = ("gpt", "o1", "o3", "o4", "codex", "chatgpt")
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class TokenRecord(Protocol):
    """One model call's usage as the cost rules read it (``evidence.TokenRecord``, which the
    token-usage reader builds; a protocol here so this module does not import its reader)."""

    @property
    def input(self) -> int: ...
    @property
    def output(self) -> int: ...
    @property
    def cache_read(self) -> int: ...
    @property
    def cache_write(self) -> int: ...
    @property
    def purpose(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def reasoning(self) -> int | None: ...
    @property
    def credits(self) -> float | None: ...
    @property
    def credits_total(self) -> float | None: ...
    @property
    def include_cache(self) -> bool | None: ...
    @property
    def request_id(self) -> str | None: ...
    @property
    def event(self) -> str | None: ...
    @property
    def timestamp(self) -> str | None: ...


# --- per-call cache semantics -----------------------------------------------------------------


def model_counts_cache(model: str) -> bool | None:
    """Whether a model's ``input_tokens`` count its cached tokens: True for GPT-family models,
    False for Claude, None when only the record's own counts can tell."""
    model = model.lower()
    if model.startswith("claude"):
        return False
    if model.startswith(_CACHE_INCLUSIVE_PREFIXES) or "gpt-" in model:
        return True
    return None


def includes_cache(record: TokenRecord) -> bool:
    """Whether the record's ``input_tokens`` already count its cached tokens: the record's own
    ``input_tokens_include_cache`` when it says; else GPT-family models yes, Claude no; another
    model yes unless its cache counts exceed its input (which only a cache-exclusive count can)."""
    return counts_cache(record.model, record.input, record.cache_read, record.cache_write, record.include_cache)


def counts_cache(model: str | None, input_tokens: int, cache_read: int, cache_write: int,
                 stated: bool | None = None) -> bool:
    """:func:`includes_cache` for counts that are not a token record (a session's usage records)."""
    if stated is not None:
        return stated
    known = model_counts_cache(model or "")
    return cache_read + cache_write <= input_tokens if known is None else known


def fresh_input(record: TokenRecord) -> int:
    """The input tokens read fresh (not from the cache): ``input_tokens`` minus the cached tokens
    it holds when it holds them (gh-aw's ``max(input − cache_read − cache_write, 0)``)."""
    if includes_cache(record):
        return max(record.input - record.cache_read - record.cache_write, 0)
    return record.input


# --- AI Credits -------------------------------------------------------------------------------


def _valid(value: float | None) -> float | None:
    """A reported figure gh-aw accepts: a finite number ≥ 0 (``parseNonNegativeFiniteNumber``)."""
    return value if value is not None and math.isfinite(value) and value >= 0 else None


def epoch_ms(text: str | None) -> int | None:
    """An ISO 8601 timestamp in milliseconds since the epoch (JavaScript's ``Date.parse`` of the
    texts AWF writes), else None: such a record is ordered after every timed one."""
    if not text:
        return None
    try:
        ts = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=dt.UTC)
    try:
        return (ts - _EPOCH) // dt.timedelta(milliseconds=1)
    except OverflowError:
        return None


@dataclass(frozen=True)
class Credits:
    """A run's AI Credits as one source states them."""

    total: float
    source: str  # the file (and event) the figures come from
    reported: int  # records (or summaries) carrying a valid figure
    # Calls after the last valid cumulative total without a figure of their own: not counted (no
    # price is ever applied), so the total is a lower bound when this is not 0.
    uncovered: int = 0
    summed: float | None = None  # Σ valid per-call figures, in time order (the total may differ)
    records: tuple[TokenRecord, ...] = ()  # the per-call records the figures are read from


def running_credits(records: Sequence[TokenRecord], source: str) -> Credits | None:
    """gh-aw's reported AI Credits of per-call records (``parseTokenUsageJsonl``): in time order
    (records without a timestamp last, in file order), ``running = total ?? running + delta``;
    the run's credits are the last ``running``. A record with neither figure adds nothing (gh-aw
    would price its tokens; fleetgrade never does) and is counted in ``uncovered`` unless a later
    cumulative total covers it. None when no record carries a valid figure."""
    deltas = [_valid(r.credits) for r in records]
    totals = [_valid(r.credits_total) for r in records]
    reported = sum(d is not None or t is not None for d, t in zip(deltas, totals, strict=True))
    if not reported:
        return None
    stamps = [epoch_ms(r.timestamp) for r in records]
    order = sorted(range(len(records)), key=lambda i: (stamps[i] is None, stamps[i] or 0, i))
    running = summed = 0.0
    uncovered = 0
    for i in order:
        delta, total = deltas[i], totals[i]
        if delta is not None:
            summed += delta
        if total is not None:
            running, uncovered = total, 0
        elif delta is not None:
            running += delta
        else:
            uncovered += 1
    return Credits(running, source, reported, uncovered, summed, tuple(records))


def router_credits(credits: Credits, marks: Sequence[str]) -> float | None:
    """The credits of the router/classifier calls among ``credits``' records (their own per-call
    figures): 0.0 when there is none; None when one of them states none, or the credits come from
    a summary (the router's share is then unknown)."""
    if not credits.records:
        return None
    total = 0.0
    for r in credits.records:
        if r.purpose and is_excluded(r.purpose, marks):
            figure = _valid(r.credits)
            if figure is None:
                return None
            total += figure
    return total


# --- the run's usage ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CallRecords:
    """One source's per-call records, deduplicated."""

    source: str  # the file(s), e.g. "sandbox/…/token-usage.jsonl" or "usage/aw_session.jsonl (firewall.token_usage)"
    records: tuple[TokenRecord, ...]
    duplicates: int = 0  # records dropped as repeats (same ``event:request_id``, or the same line)
    # Model calls each record stands for, when some stand for several (an engine log's aggregate
    # record: Copilot's ``session.shutdown``); () when each is one call.
    weights: tuple[int, ...] = ()


@dataclass(frozen=True)
class UsageTotals:
    """A run's token totals as a summary file states them (no per-call records)."""

    source: str
    input: int  # as the file counts it: see ``input_includes_cache``
    output: int
    cache_read: int
    cache_write: int
    reasoning: int | None  # None: the file states none
    model: str = ""  # the primary model, when the file names one
    input_includes_cache: bool | None = None  # as the source says; None: by ``model``'s family
    router_included: bool = True  # gh-aw's sums count the classifier call; an engine's log has none

    @property
    def fresh_input(self) -> int:
        """``input`` without the cached tokens it holds: as the source says, else by the primary
        model's family (a run mixing families is approximated by its primary model), else by the
        counts."""
        inclusive = self.input_includes_cache
        if inclusive is None:
            known = model_counts_cache(self.model)
            inclusive = self.cache_read + self.cache_write <= self.input if known is None else known
        return max(self.input - self.cache_read - self.cache_write, 0) if inclusive else self.input


@dataclass(frozen=True)
class RunUsage:
    """Everything the cost graders read, in the order of preference; each grader takes the
    first source that has what it asks for."""

    calls: CallRecords | None = None
    totals: UsageTotals | None = None  # only when there is no per-call source
    credits: Credits | None = None
    sources: tuple[str, ...] = ()  # every usage source found, in reading order
    warnings: tuple[str, ...] = ()


def dedupe(records: Iterable[TokenRecord]) -> tuple[list[TokenRecord], int]:
    """gh-aw's deduplication (``readDedupedTokenUsage``, ``parseTokenUsageJsonl``): a record whose
    ``event:request_id`` was seen is a repeat; one without a request id is a repeat of an equal
    record (gh-aw compares the raw lines; here every field read, timestamp included)."""
    seen: set[Any] = set()
    kept: list[TokenRecord] = []
    dropped = 0
    for r in records:
        rid = r.request_id.strip() if r.request_id else ""
        key: Any = (r.event or "token_usage", rid) if rid else (
            r.input, r.output, r.cache_read, r.cache_write, r.purpose, r.model, r.reasoning, r.credits,
            r.credits_total, r.include_cache, r.event, r.timestamp)
        if key in seen:
            dropped += 1
            continue
        seen.add(key)
        kept.append(r)
    return kept, dropped


def count(value: Any) -> int:
    """A token count: a non-negative integer (an integral double too), else 0."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, float) and value.is_integer() and 0 <= value < 2**63:
        return int(value)
    return 0


def document(files: RunFiles, rel: str, bad: Callable[[str], None]) -> Any:
    """A whole-file JSON document, or None (``bad`` told) when it is not JSON."""
    try:
        return parse_json(files.read(rel))
    except (JsonError, UnicodeDecodeError, RecursionError):
        bad(rel)
        return None


def agent_usage_totals(files: RunFiles, bad: Callable[[str], None]) -> UsageTotals | None:
    """``agent_usage.json``: gh-aw's sums of the run's token-usage records (router call included).
    Its ``ai_credits`` is not read: for records without AWF's figures gh-aw prices the tokens
    itself, and the file does not say which it did."""
    if not files.exists(AGENT_USAGE):
        return None
    doc = document(files, AGENT_USAGE, bad)
    if not isinstance(doc, dict):
        return None
    keys = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")
    if not any(isinstance(doc.get(k), (int, float)) and not isinstance(doc.get(k), bool) for k in keys):
        return None  # a Copilot checkpoint ({ai_credits, premium_requests}) states no tokens
    model = doc.get("primary_model") or doc.get("model")
    reasoning = doc.get("reasoning_tokens")
    stated = isinstance(reasoning, (int, float)) and not isinstance(reasoning, bool)
    inp, out, read, write = (count(doc.get(k)) for k in keys[:4])
    return UsageTotals(AGENT_USAGE, inp, out, read, write, count(reasoning) if stated else None,
                       model if isinstance(model, str) else "")


def activity_credits(files: RunFiles, bad: Callable[[str], None]) -> Credits | None:
    """``usage/activity/summary.json`` (``usage-activity-summary/v1``): ``friction.total_run_aic``,
    the sum of the agent token-usage records' own ``ai_credits_this_response`` (absent when a
    record was malformed; ``total_run_aic_partial`` when some records had none)."""
    if not files.exists(ACTIVITY_SUMMARY):
        return None
    doc = document(files, ACTIVITY_SUMMARY, bad)
    if not isinstance(doc, dict) or doc.get("schema") != ACTIVITY_SCHEMA:
        return None
    friction = doc.get("friction")
    if not isinstance(friction, dict):
        return None
    raw = friction.get("total_run_aic")
    total = _valid(float(raw)) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else None
    if total is None:
        return None
    partial = friction.get("total_run_aic_partial") is True
    return Credits(total, f"{ACTIVITY_SUMMARY} (friction.total_run_aic)", 1, 1 if partial else 0)


@dataclass
class SessionUsage:
    """The usage events of the first unified-session file that has any, detection phase
    excluded, collected while ``evidence`` reads that file for its other records (one pass)."""

    file: str | None = None
    # Per event type: the records, and whether each is a model call (a ``usage.report`` without
    # a ``usage``, Copilot's checkpoint, states credits only).
    events: dict[str, list[tuple[TokenRecord, bool]]] = field(default_factory=dict)

    def add(self, rel: str, kind: str, record: TokenRecord, is_call: bool) -> None:
        if self.file is not None and rel != self.file:
            return  # the merged projection repeats the agent's records: one file only
        self.file = rel
        self.events.setdefault(kind, []).append((record, is_call))

    def records(self, kind: str, calls_only: bool = False) -> list[TokenRecord]:
        return [r for r, is_call in self.events.get(kind, ()) if is_call or not calls_only]


def read_usage(files: RunFiles, token_files: Sequence[tuple[str, Sequence[TokenRecord]]],
               session: SessionUsage, bad: Callable[[str], None]) -> RunUsage:
    """The run's :class:`RunUsage` from its token-usage files (each already read, in graders.md
    §5's order), the unified session's usage events, and the summary files (read here)."""
    sources: list[str] = []
    warnings: list[str] = []
    found = [(rel, recs) for rel, recs in token_files if recs]
    calls: CallRecords | None = None
    if found:
        calls = _call_records(" + ".join(rel for rel, _ in found), [r for _, recs in found for r in recs], warnings)
        sources.append(calls.source)
    for kind in SESSION_USAGE_EVENTS:
        if session.events.get(kind):
            name = f"{session.file} ({kind})"
            sources.append(name)
            recs = session.records(kind, calls_only=True)
            if calls is None and recs:
                calls = _call_records(name, recs, warnings)
    totals = agent_usage_totals(files, bad) if calls is None else None
    if totals is not None:
        sources.append(totals.source)
    credits = _credits(calls, session) or activity_credits(files, bad)
    if credits is not None and credits.source not in sources:
        sources.append(credits.source)
    if credits is not None and credits.uncovered:
        warnings.append(f"{credits.source}: {credits.uncovered} model call(s) after the last AI Credits total state "
                        "no credits; they are not counted (fleetgrade never prices tokens)")
    return RunUsage(calls, totals, credits, tuple(sources), tuple(warnings))


def _call_records(source: str, records: list[TokenRecord], warnings: list[str]) -> CallRecords:
    kept, dropped = dedupe(records)
    if dropped:
        warnings.append(f"{source}: {dropped} repeated usage record(s) (same event:request_id) counted once")
    return CallRecords(source, tuple(kept), dropped)


def _credits(calls: CallRecords | None, session: SessionUsage) -> Credits | None:
    """The first per-call source stating AI Credits: the per-call records, else the session's
    ``firewall.token_usage``, else its ``usage.report`` (each on its own: never summed together)."""
    if calls is not None:
        found = running_credits(calls.records, calls.source)
        if found is not None:
            return found
    for kind in SESSION_USAGE_EVENTS:
        recs = session.records(kind)
        if recs:
            found = running_credits(dedupe(recs)[0], f"{session.file} ({kind})")
            if found is not None:
                return found
    return None

# --- totals of the agent's calls ----------------------------------------------------------------


@dataclass(frozen=True)
class CallTotals:
    """Token classes, calls and credits of the agent's calls (router/classifier calls apart)."""

    source: str
    calls: int
    input: int
    output: int
    cache_read: int
    cache_write: int
    reasoning: int | None  # None: no call states its reasoning tokens
    cache_inclusive: int  # calls whose input_tokens held their cached tokens
    models: tuple[tuple[str, int], ...]  # (model, agent calls), most calls first, then by name
    excluded: Mapping[str, int]  # router/classifier calls by purpose
    excluded_tokens: int  # every token of those calls (fresh input + output + cache + reasoning)
    duplicates: int = 0

    @property
    def total(self) -> int:
        """Every token the agent's calls read or wrote, each once."""
        return self.input + self.output + self.cache_read + self.cache_write + (self.reasoning or 0)


def is_excluded(purpose: str, marks: Sequence[str]) -> bool:
    """A router/classifier call: its ``purpose`` holds one of ``marks`` (lowercased)."""
    low = purpose.lower()
    return any(m in low for m in marks)


def call_totals(calls: CallRecords, marks: Sequence[str]) -> CallTotals:
    """The sums over ``calls``' records whose purpose is none of ``marks``: the token classes,
    disjoint (fresh input), and the model mix."""
    records = calls.records
    weights = calls.weights or (1,) * len(records)
    aside = {p for p in {r.purpose for r in records} if is_excluded(p, marks)}
    agent = [r for r in records if r.purpose not in aside] if aside else list(records)
    agent_weights = [w for r, w in zip(records, weights, strict=True) if r.purpose not in aside]
    # Each model's family is looked up once (a large run has tens of thousands of records).
    family = {m: model_counts_cache(m) for m in {r.model for r in records}}

    def fresh(r: TokenRecord) -> tuple[int, bool]:
        inclusive = r.include_cache if r.include_cache is not None else family[r.model]
        if inclusive is None:
            inclusive = r.cache_read + r.cache_write <= r.input
        return (max(r.input - r.cache_read - r.cache_write, 0) if inclusive else r.input), inclusive

    fresh_agent = [fresh(r) for r in agent]
    models: Counter[str] = Counter()
    for r, w in zip(agent, agent_weights, strict=True):
        models[r.model or "unknown"] += w
    excluded: Counter[str] = Counter()
    for r, w in zip(records, weights, strict=True):
        if r.purpose in aside:
            excluded[r.purpose] += w
    return CallTotals(
        calls.source, sum(agent_weights), sum(f for f, _ in fresh_agent), sum(r.output for r in agent),
        sum(r.cache_read for r in agent), sum(r.cache_write for r in agent), stated_sum([r.reasoning for r in agent]),
        sum(w for (_, inc), w in zip(fresh_agent, agent_weights, strict=True) if inc),
        tuple(sorted(models.items(), key=lambda kv: (-kv[1], kv[0]))),
        dict(sorted(excluded.items())),
        sum(fresh(r)[0] + r.output + r.cache_read + r.cache_write + (r.reasoning or 0)
            for r in records if r.purpose in aside),
        calls.duplicates)


def stated_sum(values: Sequence[int | None]) -> int | None:
    """The sum of the counts stated; None when none is."""
    stated = [v for v in values if v is not None]
    return sum(stated) if stated else None
