"""Load the grading plans for a command (``--graders FILE``, ``--graders-dir DIR``)."""

from __future__ import annotations

from pathlib import Path

import yaml

from graders.plan import PlanSet, default_plan
from graders.trace_rules.config import ConfigError, TraceConfig, default_config, from_mapping, merge


class PlanLoadError(ValueError):
    """A graders configuration that cannot be used; the message says which file and why."""


def load_plans(graders: str | None, graders_dir: str | None) -> PlanSet:
    if graders or graders_dir:
        raise PlanLoadError("graders configuration files are not supported yet")
    return PlanSet(default_plan())


def load_trace_config(path: str | None) -> TraceConfig:
    """The trace-rule config of a pipeline run: strict, unlike the trace-grader CLI's fail-open load.

    An explicit ``--trace-config`` that is missing or broken fails the command before any work.
    """
    if path is None:
        return default_config()
    p = Path(path)
    if not p.is_file():
        raise PlanLoadError(f"{path}: trace config file not found")
    try:
        loaded = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise PlanLoadError(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(loaded, dict):
        raise PlanLoadError(f"{path}: the top level must be a mapping")
    try:
        return from_mapping(merge(loaded))
    except (ConfigError, TypeError) as exc:
        raise PlanLoadError(f"{path}: {exc}") from exc
