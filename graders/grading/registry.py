"""The grader registry: stable ids, metadata and implementations.

Each grader family module registers its graders here at import time (``graders.families.catalog``
imports every family). Ids are stable: they key table rows, configs and manifests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

Direction = Literal["higher_is_better", "lower_is_better"]
Family = Literal["builtin", "trajectory"]


@dataclass(frozen=True)
class GraderContext:
    """What a grader sees besides the trace: its ``config`` and the run's grader count.

    ``file_ir`` is the run's ``agent/graders/trajectory_ir.json`` when present (the
    trajectory graders use it as their last IR candidate; docs/deviations-trajectory.md).
    """

    config: Any = field(default_factory=dict)
    grader_count: int = 0
    file_ir: Any = None
    # Values derived from the run's trace alone, computed by the first grader that needs them
    # and shared by the run's other graders (``grade_trace`` gives a run's graders one dict).
    run_memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    def memo_for(self, trace: Any) -> dict[Any, Any]:
        """``run_memo``, emptied first if it holds values of another run (trace or IR file)."""
        memo = self.run_memo
        owner = memo.get(_OWNER)
        if owner is None or owner[0] is not trace or owner[1] is not self.file_ir:
            memo.clear()
            memo[_OWNER] = (trace, self.file_ir)
        return memo


_OWNER: Any = object()
T = TypeVar("T")


def per_run(ctx: GraderContext | None, trace: Any, key: Any, compute: Callable[[], T]) -> T:
    """``compute()`` once per run: kept in ``ctx``'s run memo (computed each time without a ctx)."""
    if ctx is None:
        return compute()
    memo = ctx.memo_for(trace)
    if key in memo:
        value: T = memo[key]
        return value
    value = memo[key] = compute()
    return value


# A grader returns what a gh-aw grader returns: a number, None, or a result record
# ({value, passed?, message?, details?, ...}); normalization turns it into a result.
GraderFn = Callable[[dict[str, Any], GraderContext], Any]


@dataclass(frozen=True)
class GraderSpec:
    id: str
    name: str
    description: str
    unit: str
    direction: Direction
    family: Family
    fn: GraderFn
    threshold: float | None = None
    min: float | None = None
    max: float | None = None
    # Bumped whenever the implementation changes what it computes; part of the row's
    # implementation version and of the incremental-backfill digest.
    revision: int = 1


_REGISTRY: dict[str, GraderSpec] = {}


def register(spec: GraderSpec) -> GraderSpec:
    if spec.id in _REGISTRY:
        raise ValueError(f"grader id registered twice: {spec.id}")
    _REGISTRY[spec.id] = spec
    return spec


def get(grader_id: str) -> GraderSpec | None:
    _load()
    return _REGISTRY.get(grader_id)


def all_specs(family: Family | None = None) -> list[GraderSpec]:
    """Registered graders in registration order (built-ins first, in gh-aw registry order)."""
    _load()
    return [s for s in _REGISTRY.values() if family is None or s.family == family]


def _load() -> None:
    import graders.families.catalog  # noqa: F401  (registers every family)
