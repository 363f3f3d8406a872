"""Load the grading plans for a command (``--graders FILE``, ``--graders-dir DIR``)."""

from __future__ import annotations

from pathlib import Path

import yaml

from graders.families.opvalue.freeze import validate_content
from graders.families.trace_rules.config import ConfigError, TraceConfig, default_config, from_mapping, merge
from graders.grading import safeyaml
from graders.grading.config import GradersConfigError, load_graders, load_graders_dir
from graders.grading.plan import TIMEOUT_LIMIT, GradingPlan, PlanSet, default_plan


class PlanLoadError(ValueError):
    """A graders configuration that cannot be used; the message says which file and why."""


def _checked(plan: GradingPlan, where: str) -> GradingPlan:
    """Fail fast on an operational-value evaluator that could never run (shebang, size, bash -n)."""
    for entry in plan.enabled:
        if entry.source == "operational-value" and entry.evaluator:
            problem = validate_content(entry.evaluator)
            if problem is not None:
                raise PlanLoadError(f"{where}: graders.operational-value evaluator {problem}")
    return plan


def load_plans(
    graders: str | None,
    graders_dir: str | None,
    archived_evaluators: bool = True,
    allow_unsandboxed: bool = False,
    timeout_limit: int = TIMEOUT_LIMIT,
) -> PlanSet:
    """The plan of every workflow; a bad configuration raises before any work is scheduled."""
    try:
        default = _checked(load_graders(graders), graders) if graders else default_plan()
        by_workflow: tuple[tuple[str, GradingPlan], ...] = ()
        if graders_dir:
            if not Path(graders_dir).is_dir():
                raise PlanLoadError(f"{graders_dir}: not a directory")
            loaded = load_graders_dir(graders_dir)
            by_workflow = tuple((w, _checked(p, f"{graders_dir}/{w}")) for w, p in sorted(loaded.items()))
    except GradersConfigError as exc:
        where = getattr(exc, "path", None) or graders or graders_dir
        message = f"{exc}{exc.hint}"
        raise PlanLoadError(message if message.startswith(f"{where}: ") else f"{where}: {message}") from exc
    return PlanSet(default, by_workflow, archived_evaluators=archived_evaluators,
                   allow_unsandboxed=allow_unsandboxed, timeout_limit=timeout_limit)


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
        loaded = safeyaml.load(safeyaml.read_capped_text(p)) or {}
    except (yaml.YAMLError, RecursionError, UnicodeDecodeError) as exc:
        raise PlanLoadError(f"{path}: not valid YAML ({safeyaml.describe(exc)})") from exc
    except safeyaml.YamlLimitError as exc:
        raise PlanLoadError(f"{path}: YAML refused: {exc}") from exc
    except OSError as exc:
        raise PlanLoadError(f"{path}: cannot read the trace config: {exc.strerror or exc}") from exc
    if not isinstance(loaded, dict):
        raise PlanLoadError(f"{path}: the top level must be a mapping")
    try:
        return from_mapping(merge(loaded))
    except (ConfigError, TypeError) as exc:
        raise PlanLoadError(f"{path}: {exc}") from exc


def graders_dir_files(graders_dir: str) -> dict[str, Path]:
    """The files of a ``--graders-dir`` by the workflow they configure (a file's stem)."""
    return {p.stem: p for p in sorted(Path(graders_dir).iterdir()) if p.is_file()}
