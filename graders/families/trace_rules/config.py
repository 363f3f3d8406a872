"""The adapter config (spec §7): engine defaults, one-level merges, typed view.

Loading mirrors the reference: a missing file means defaults, an unreadable or unparsable
file means a ``[trace-grader] config load failed (...)`` warning on stderr plus defaults.
Unlike the reference, values the rules cannot use (a null or non-numeric ``retry_threshold``
or ``step_budget``) raise :class:`ConfigError` naming the key instead of crashing mid-grade.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

from graders.grading import safeyaml

DEFAULTS: dict[str, Any] = {
    "verified": False,
    "forbidden_tools": [],
    "retry_threshold": 3,
    "step_budget": 40,
    "order_constraints": {"must_precede": []},
    "grounding": {"enabled": True},
    "judge": {"enabled": False, "model": None, "rubric": []},
}
_NESTED = ("order_constraints", "grounding", "judge")

WARN_PREFIX = "[trace-grader]"


class ConfigError(ValueError):
    """A config value the engine cannot use; the message names the key."""


@dataclass(frozen=True)
class TraceConfig:
    verified: bool
    forbidden_tools: frozenset[str]
    retry_threshold: int
    step_budget: int
    # Items are kept as given: a non-string "before" is never satisfied (reference semantics).
    must_precede: tuple[tuple[Any, Any], ...]
    grounding_enabled: bool
    judge_enabled: bool

    @property
    def judge_axis(self) -> str:
        # The inactive text says "verified:false" even when verified is true (spec §10.1, kept).
        return "active" if self.verified and self.judge_enabled else "disabled (adapter, verified:false)"


def merge(loaded: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults updated at top level, then the nested sections merged one level deep."""
    cfg = copy.deepcopy(DEFAULTS)
    cfg.update(loaded)
    for key in _NESTED:
        section = loaded.get(key) or {}
        if not isinstance(section, Mapping):
            raise TypeError(f"'{key}' must be a mapping, got {type(section).__name__}")
        cfg[key] = {**DEFAULTS[key], **section}
    return cfg


def load_mapping(path: str | Path | None, stderr: TextIO | None = None) -> dict[str, Any]:
    """The merged config dict; never raises (fail-open like the reference)."""
    err = stderr if stderr is not None else sys.stderr
    if path is None or not Path(path).is_file():
        return copy.deepcopy(DEFAULTS)
    try:
        try:  # bounded: a billion-laughs file is refused, not expanded
            loaded = safeyaml.load(safeyaml.read_capped_text(Path(path))) or {}
        except (yaml.YAMLError, RecursionError) as exc:
            raise ValueError(safeyaml.describe(exc)) from exc
        if not isinstance(loaded, Mapping):
            raise TypeError(f"top level must be a mapping, got {type(loaded).__name__}")
        return merge(loaded)
    except Exception as e:  # any read/parse problem: warn and keep the defaults
        print(f"{WARN_PREFIX} config load failed ({e}); using defaults", file=err)
        return copy.deepcopy(DEFAULTS)


def _as_int(cfg: Mapping[str, Any], key: str) -> int:
    value = cfg.get(key, DEFAULTS[key])
    # int() semantics of the reference: "2" -> 2, 2.9 -> 2, true -> 1.
    if isinstance(value, (bool, int, float, str)):
        try:
            return int(value)
        except (ValueError, OverflowError):
            pass
    shown = "null" if value is None else repr(value)
    raise ConfigError(f"config key '{key}' must be an integer, got {shown}")


def _pairs(value: Any) -> tuple[tuple[Any, Any], ...]:
    if not isinstance(value, list):
        return ()  # null, or a scalar the reference would iterate into nothing useful
    return tuple((p[0], p[1]) for p in value if isinstance(p, (list, tuple)) and len(p) == 2)


def from_mapping(cfg: Mapping[str, Any]) -> TraceConfig:
    forbidden = cfg.get("forbidden_tools") or []
    if isinstance(forbidden, str) or not isinstance(forbidden, (list, tuple, set)):
        raise ConfigError(f"config key 'forbidden_tools' must be a list of tool names, got {forbidden!r}")
    order = cfg.get("order_constraints") or {}
    grounding = cfg.get("grounding") or {}
    judge = cfg.get("judge") or {}
    return TraceConfig(
        verified=bool(cfg.get("verified")),
        # Non-string entries can never equal a tool name, so dropping them changes nothing.
        forbidden_tools=frozenset(t for t in forbidden if isinstance(t, str)),
        retry_threshold=_as_int(cfg, "retry_threshold"),
        step_budget=_as_int(cfg, "step_budget"),
        must_precede=_pairs(order.get("must_precede") if isinstance(order, Mapping) else None),
        grounding_enabled=bool(grounding.get("enabled", True)) if isinstance(grounding, Mapping) else True,
        judge_enabled=bool(judge.get("enabled")) if isinstance(judge, Mapping) else False,
    )


def load_config(path: str | Path | None, stderr: TextIO | None = None) -> TraceConfig:
    return from_mapping(load_mapping(path, stderr))


def default_config() -> TraceConfig:
    return from_mapping(DEFAULTS)
