"""The plugin registry: decorators, lookups by kind, build-from-name, and how plugins are loaded."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import pytest

from graders.grading import registry
from graders.grading.registry import GraderContext, PluginError, Registry


def _trace(**fields: Any) -> dict[str, Any]:
    return {"toolCalls": [], **fields}


def test_decorators_register_by_kind_in_order_and_return_the_function() -> None:
    reg = Registry()

    @reg.grader("b-grader", name="B", description="", unit="count", direction="lower_is_better", family="x")
    def b(trace: dict[str, Any], ctx: GraderContext) -> int:
        return 2

    @reg.grader("a-grader", name="A", description="", unit="count", direction="lower_is_better", family="y",
                threshold=1, revision=3)
    def a(trace: dict[str, Any], ctx: GraderContext) -> int:
        return 1

    @reg.trace_rule("rule")
    def rule(run: Any, cfg: Any) -> list[Any]:
        return []

    assert b(_trace(), GraderContext()) == 2  # the decorator hands the function back
    assert reg.grader_ids() == ("b-grader", "a-grader")
    assert reg.grader_ids("y") == ("a-grader",)
    spec = reg.get("grader", "a-grader")
    assert (spec.threshold, spec.revision, spec.source, spec.family, spec.fn) == (1, 3, "builtin", "y", a)
    assert reg.plugins("trace_rule") == [rule]
    assert reg.names("executor") == ()


def test_a_name_registered_twice_is_an_error() -> None:
    reg = Registry()
    reg.trace_rule("r")(print)
    with pytest.raises(PluginError, match="trace_rule registered twice: r"):
        reg.trace_rule("r")(print)


def test_create_builds_a_factory_from_its_configuration_and_refuses_unknown_names() -> None:
    reg = Registry()
    made: list[bool] = []

    @reg.executor("boxed")
    def factory(allow_unsandboxed: bool = False) -> tuple[str, bool]:
        made.append(allow_unsandboxed)
        return ("box", allow_unsandboxed)

    assert reg.create("executor", "boxed", allow_unsandboxed=True) == ("box", True)
    assert made == [True]
    with pytest.raises(PluginError, match="no executor named 'other' is registered"):
        reg.create("executor", "other")
    reg.trace_rule("r")(print)
    assert reg.create("trace_rule", "r") is print
    with pytest.raises(PluginError, match="takes no configuration"):
        reg.create("trace_rule", "r", k=1)


def test_the_loader_runs_once_on_first_lookup_and_sees_its_own_registrations() -> None:
    calls: list[tuple[str, ...]] = []

    def loader(reg: Registry) -> None:
        reg.trace_rule("first")(print)
        calls.append(reg.names("trace_rule"))  # a plugin module looking up while it loads

    reg = Registry(loader=loader)
    assert calls == []
    assert reg.names("trace_rule") == ("first",)
    assert reg.names("trace_rule") == ("first",)
    assert calls == [("first",)]


def test_a_failed_load_is_retried_rather_than_leaving_a_silent_partial_registry() -> None:
    attempts: list[int] = []

    def loader(reg: Registry) -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise PluginError("boom")
        reg.trace_rule("r")(print)

    reg = Registry(loader=loader)
    with pytest.raises(PluginError, match="boom"):
        reg.names("trace_rule")
    assert reg.names("trace_rule") == ("r",)


def test_without_our_entry_point_the_registry_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kw: [])
    with pytest.raises(PluginError, match=r"no fleetgrade\.plugins entry point of fleetgrade"):
        registry.load_entry_points(Registry())


def test_the_installed_registry_has_every_family() -> None:
    assert registry.grader_ids("builtin") == (
        "tool-success-rate", "tool-failure-count", "retries", "loops", "trajectory-efficiency",
        "execution-step-count", "execution-duration", "working-set-rebuild-factor", "context-growth",
        "artifact-production")
    assert len(registry.grader_ids("trajectory")) == 22
    assert registry.grader_ids("observed") == (
        "run-conclusion", "mcp-tool-error-count", "mcp-tool-success-rate", "safe-output-error-count",
        "context-growth-cached", "working-set-rebuild-factor-cached", "tool-call-count", "tool-error-count",
        "tokens-input", "tokens-output", "tokens-cache-read", "tokens-cache-write", "tokens-reasoning", "ai-credits",
        "model-calls", "cost-per-tool-call")
    assert sorted(registry.grader_ids()) == sorted((*registry.grader_ids("builtin"), *registry.grader_ids("trajectory"),
                                                    *registry.grader_ids("observed")))
    # A plan holds all but the observed family (source fleetgrade), which is graded beside it; where
    # the observed graders register (first when a module imports them directly) does not matter.
    assert [s.id for s in registry.plan_specs()] == [*registry.grader_ids("builtin"), *registry.grader_ids("trajectory")]
    assert {s.source for s in registry.all_specs("observed")} == {"fleetgrade"}
    # Registration order follows import order (graders.prepare imports the operational-value executor).
    assert sorted(registry.sandboxed_families()) == ["inline", "operational-value"]
    assert registry.make_executor("builtin") is None
