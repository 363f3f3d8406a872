"""The grading plan: which graders run on a run, with which metadata (the manifest entries).

A plan is derived from a validated ``graders:`` configuration (``graders.grading.config``) or, with no
configuration, from the registry defaults. Its entries mirror ``grader_manifest.json``.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson

from graders.grading import registry
from graders.grading.normalize import result_base
from schemas.grader import ManifestEntry, description_fields

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class PlanEntry(ManifestEntry):
    """One manifest entry (docs/reference/graders.md §3), plus the trusted code for non-built-ins."""

    script: str = field(default="", repr=False)
    evaluator: bytes = field(default=b"", repr=False)
    # Set when the grader cannot run at all (e.g. an archived evaluator that does not verify):
    # the engine reports it as the grader's runtime error, as gh-aw does.
    error: str = ""


@dataclass(frozen=True)
class GradingPlan:
    entries: tuple[PlanEntry, ...]

    # A plan is built once and read for every run: what derives from it is computed once.
    @functools.cached_property
    def enabled(self) -> tuple[PlanEntry, ...]:
        return tuple(e for e in self.entries if e.enabled)

    def manifest(self) -> dict[str, Any]:
        return {"version": 1, "graders": [e.manifest_entry() for e in self.entries]}

    def digest(self) -> str:
        """SHA-256 of the canonical manifest: the ``config_digest`` column."""
        return self._digest

    def ids_in_family(self, family: str) -> frozenset[str]:
        """Ids of the enabled entries in ``family`` (asked for every run: kept on the plan)."""
        ids = self._family_ids.get(family)
        if ids is None:
            ids = self._family_ids[family] = frozenset(e.id for e in self.enabled if family_of(e) == family)
        return ids

    @functools.cached_property
    def _family_ids(self) -> dict[str, frozenset[str]]:
        return {}

    @functools.cached_property
    def result_templates(self) -> tuple[dict[str, Any], ...]:
        """Each enabled entry's result before its grader runs (``normalize.result_base``), in
        ``enabled`` order: the same for every run, so built once (copy with ``fresh_base``)."""
        return tuple(result_base(e) for e in self.enabled)

    def derived(self, key: str, compute: Callable[[], T]) -> T:
        """``compute()`` once per plan under ``key`` (a module-prefixed name): what a layer above
        derives from the plan alone (the rows' run-independent columns)."""
        memo = self._derived
        if key in memo:
            value: T = memo[key]
            return value
        value = memo[key] = compute()
        return value

    @functools.cached_property
    def _derived(self) -> dict[str, Any]:
        return {}

    @functools.cached_property
    def _digest(self) -> str:
        return hashlib.sha256(orjson.dumps(self.manifest(), option=orjson.OPT_SORT_KEYS)).hexdigest()


def with_entry(plan: GradingPlan, entry: PlanEntry | None) -> GradingPlan:
    """``plan`` plus ``entry`` at the end, unless the plan already has that grader id."""
    if entry is None or any(e.id == entry.id for e in plan.entries):
        return plan
    return GradingPlan((*plan.entries, entry))


def entry_from_spec(spec: registry.GraderSpec, overrides: dict[str, Any] | None = None) -> PlanEntry:
    """A registry grader with its defaults, optionally overridden by a config entry."""
    o = overrides or {}
    fields = description_fields(spec)
    for key in ("description", "unit", "direction", "threshold", "max", "min"):
        fields[key] = o.get(key, fields[key])
    fields["name"] = o.get("name") or spec.name
    return PlanEntry(**fields, enabled=o.get("enabled", True) is not False, config=o.get("config"))


def default_plan() -> GradingPlan:
    """No configuration: every registered grader a plan holds (built-ins, then trajectory) with defaults."""
    return GradingPlan(tuple(entry_from_spec(s) for s in registry.plan_specs()))


def plan_with_overrides(overrides: dict[str, dict[str, Any]]) -> GradingPlan:
    """Defaults with per-grader metadata/config overrides (the conformance ``config.json``)."""
    return GradingPlan(tuple(entry_from_spec(s, overrides.get(s.id)) for s in registry.plan_specs()))


def family_of(entry: PlanEntry) -> str:
    """The fan-out family of an entry (``schemas.grader`` says what a family is)."""
    return entry.family


# A sandboxed grader that timed out on this many consecutive runs in a worker is errored, unrun,
# for the rest of the job (graders.grading.engine.TimeoutBreaker; 0 never stops one).
TIMEOUT_LIMIT = 3


@dataclass(frozen=True)
class PlanSet:
    """The plan of every workflow: per-workflow plans (``--graders-dir``) over a default."""

    default: GradingPlan
    by_workflow: tuple[tuple[str, GradingPlan], ...] = ()
    # Grade runs that carry their own archived operational-value evaluator with it.
    archived_evaluators: bool = True
    # Explicit opt-out of the sandboxes (``--allow-unsandboxed``); never the default.
    allow_unsandboxed: bool = False
    # Consecutive timeouts after which a sandboxed grader is errored, unrun (``--grader-timeout-limit``).
    timeout_limit: int = TIMEOUT_LIMIT

    def for_workflow(self, workflow: str) -> GradingPlan:
        for name, plan in self.by_workflow:
            if name == workflow:
                return plan
        return self.default

    def plans(self) -> list[GradingPlan]:
        return [self.default, *(p for _, p in self.by_workflow)]

    def families(self) -> list[str]:
        """Families used by any enabled entry, in first-seen manifest order."""
        seen: dict[str, None] = {}
        for plan in self.plans():
            for entry in plan.enabled:
                seen.setdefault(family_of(entry), None)
        if self.archived_evaluators:
            seen.setdefault("operational-value", None)
        return list(seen)


def family_ids(plan: GradingPlan, family: str) -> frozenset[str]:
    return plan.ids_in_family(family)
