"""One registry for every plugin kind: graders, sandbox executors, trace rules, input formats.

A family module registers its plugins with a decorator as it is imported (``@grader``,
``@executor``, ``@trace_rule``); callers look them up by kind and name, or build one from a name
and a configuration (``create``). The registry never imports a family: on the first lookup it
loads the modules of the ``fleetgrade.plugins`` entry-point group, this distribution's own
catalog (``graders.families.catalog``) first, then third-party packages' by name
(docs/architecture.md, "Adding a grader"). Ids are stable: they key table rows, configs and
manifests.
"""

from __future__ import annotations

import importlib.metadata
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar

from schemas.grader import GraderDescription, Source

Kind = Literal["grader", "executor", "trace_rule", "input_format"]
KINDS: Final[tuple[Kind, ...]] = ("grader", "executor", "trace_rule", "input_format")
ENTRY_POINT_GROUP: Final = "fleetgrade.plugins"
_OWN_DISTRIBUTION: Final = "fleetgrade"
# Sources whose graders are registered functions (the others run in an executor's sandbox).
REGISTERED_SOURCES: Final = ("builtin", "fleetgrade")
# The source of the graders no plan holds: graded beside every run's plan (graders/families/observed.py).
BESIDE_PLAN_SOURCE: Final = "fleetgrade"


@dataclass(frozen=True)
class GraderContext:
    """What a grader sees besides the trace: its ``config`` and the run's grader count.

    ``file_ir`` is the run's ``agent/graders/trajectory_ir.json`` when present (the
    trajectory graders use it as their last IR candidate; docs/deviations-trajectory.md).
    """

    config: Any = field(default_factory=dict)
    grader_count: int = 0
    file_ir: Any = None
    # The run's ``RunEvidence`` (graders/formats/evidence.py): what the observed family grades.
    evidence: Any = None
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
F = TypeVar("F", bound=Callable[..., Any])


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


@dataclass(frozen=True, kw_only=True)
class GraderSpec(GraderDescription):
    """A registered grader: its one description and its implementation."""

    fn: GraderFn


class PluginError(LookupError):
    """An unknown plugin name, a name registered twice, or a plugin module that fails to load."""


class Registry:
    """Plugins by kind and name, in registration order (which is plan order for graders)."""

    def __init__(self, loader: Callable[[Registry], None] | None = None) -> None:
        self._plugins: dict[str, dict[str, Any]] = {kind: {} for kind in KINDS}
        self._loader = loader
        self._loaded = loader is None
        self._loading = False
        self._lock = threading.RLock()

    # -- registration ------------------------------------------------------------------------
    def register(self, kind: Kind, name: str, plugin: Any) -> Any:
        table = self._plugins[kind]
        if name in table:
            raise PluginError(f"{kind} registered twice: {name}")
        table[name] = plugin
        return plugin

    def grader(self, id: str, *, name: str, description: str, unit: str, direction: str, family: str,
               threshold: float | None = None, min: float | None = None, max: float | None = None,
               revision: int = 1, source: Source = "builtin") -> Callable[[F], F]:
        """Register the decorated ``fn(trace, ctx)`` as a grader of ``source`` (one of
        ``REGISTERED_SOURCES``: ``builtin``, or ``fleetgrade`` for graders no plan holds)."""
        if source not in REGISTERED_SOURCES:
            raise PluginError(f"grader {id}: a registered grader's source is one of {', '.join(REGISTERED_SOURCES)}")

        def register(fn: F) -> F:
            self.register("grader", id, GraderSpec(
                id=id, name=name, description=description, unit=unit, direction=direction,
                threshold=threshold, min=min, max=max, revision=revision, source=source,
                family=family, fn=fn))
            return fn

        return register

    def executor(self, family: str) -> Callable[[F], F]:
        """Register the decorated factory ``(allow_unsandboxed: bool) -> Executor`` of a
        sandboxed family: it is called once per worker, and the executor grades that family."""
        return self._decorator("executor", family)

    def trace_rule(self, name: str) -> Callable[[F], F]:
        """Register the decorated ``rule(run, config) -> list[Flag]`` (trace-grader's rules)."""
        return self._decorator("trace_rule", name)

    def input_format(self, name: str) -> Callable[[F], F]:
        """Register the decorated reader class of an input format (graders/formats): ``create``
        makes a reader, ``name`` is its kind (``runs.source_kind``)."""
        return self._decorator("input_format", name)

    def _decorator(self, kind: Kind, name: str) -> Callable[[F], F]:
        def register(obj: F) -> F:
            self.register(kind, name, obj)
            return obj

        return register

    # -- lookup --------------------------------------------------------------------------------
    def get(self, kind: Kind, name: str) -> Any | None:
        self.load()
        return self._plugins[kind].get(name)

    def plugins(self, kind: Kind) -> list[Any]:
        """Every plugin of ``kind``, in registration order."""
        self.load()
        return list(self._plugins[kind].values())

    def names(self, kind: Kind) -> tuple[str, ...]:
        self.load()
        return tuple(self._plugins[kind])

    def create(self, kind: Kind, name: str, **config: Any) -> Any:
        """Build a plugin from its name and configuration: a factory (executor, input format) is
        called with ``config``; a grader or trace rule is a pure function and is returned as is."""
        plugin = self.get(kind, name)
        if plugin is None:
            raise PluginError(f"no {kind} named {name!r} is registered")
        if kind in ("executor", "input_format"):
            return plugin(**config)
        if config:
            raise PluginError(f"{kind} {name!r} takes no configuration here (a grader's comes with the run)")
        return plugin

    def load(self) -> None:
        """Run the loader once; other threads wait for it, the loading thread itself (a plugin
        module that looks a plugin up as it is imported) sees what is registered so far."""
        if self._loaded:
            return
        with self._lock:
            if self._loaded or self._loading or self._loader is None:
                return
            self._loading = True
            try:
                self._loader(self)
            finally:
                self._loading = False
            self._loaded = True

    # -- graders -------------------------------------------------------------------------------
    def specs(self, family: str | None = None) -> list[GraderSpec]:
        return [s for s in self.plugins("grader") if family is None or s.family == family]

    def grader_ids(self, family: str | None = None) -> tuple[str, ...]:
        return tuple(s.id for s in self.specs(family))


def load_entry_points(registry: Registry) -> None:
    """Import every module of the ``fleetgrade.plugins`` group: ours first, then by name.

    Without ours fleetgrade is not installed (metadata missing), and a registry without the
    built-in graders would grade nothing silently: that is an error.
    """
    found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    ordered = sorted(found, key=lambda ep: (_distribution(ep) != _OWN_DISTRIBUTION, ep.name))
    if not any(_distribution(ep) == _OWN_DISTRIBUTION for ep in ordered):
        raise PluginError(f"no {ENTRY_POINT_GROUP} entry point of {_OWN_DISTRIBUTION}: install the package "
                          "(make install, or pip install .) so that its grader families are found")
    for ep in ordered:
        try:
            ep.load()
        except Exception as exc:
            raise PluginError(f"plugin {ep.name} ({ep.value}) failed to load: {exc}") from exc


def _distribution(ep: importlib.metadata.EntryPoint) -> str:
    dist = ep.dist
    return dist.name if dist is not None else ""


# The process's registry; the decorators and lookups below are its methods.
REGISTRY: Final = Registry(loader=load_entry_points)
grader = REGISTRY.grader
executor = REGISTRY.executor
trace_rule = REGISTRY.trace_rule
input_format = REGISTRY.input_format
create = REGISTRY.create


def get(grader_id: str) -> GraderSpec | None:
    spec: GraderSpec | None = REGISTRY.get("grader", grader_id)
    return spec


def all_specs(family: str | None = None) -> list[GraderSpec]:
    """Registered graders in registration order (built-ins first, in gh-aw registry order)."""
    return REGISTRY.specs(family)


def plan_specs() -> list[GraderSpec]:
    """The registered graders a plan holds, in registration order: all but the ``fleetgrade``
    source, which is graded beside every plan and never in one (manifests stay gh-aw's)."""
    return [s for s in REGISTRY.specs() if s.source != BESIDE_PLAN_SOURCE]


def grader_ids(family: str | None = None) -> tuple[str, ...]:
    """Registered grader ids in registration order, e.g. ``grader_ids("builtin")``: gh-aw's ten."""
    return REGISTRY.grader_ids(family)


def sandboxed_families() -> tuple[str, ...]:
    """The families whose graders run in a sandbox: those that registered an executor, by name
    (a family module imported before the registry loads registers first; order means nothing here)."""
    return tuple(sorted(REGISTRY.names("executor")))


def make_executor(family: str, allow_unsandboxed: bool = False) -> Any:
    """The sandbox of ``family``, or None for in-process families; created once per worker.

    Sandboxes fail closed: when one cannot be set up, its graders report an error. Only an
    explicit ``allow_unsandboxed`` (the ``--allow-unsandboxed`` flag) lifts that.
    """
    if REGISTRY.get("executor", family) is None:
        return None
    return REGISTRY.create("executor", family, allow_unsandboxed=allow_unsandboxed)


def close_executor(executor: Any) -> None:
    close = getattr(executor, "close", None)
    if callable(close):
        close()
