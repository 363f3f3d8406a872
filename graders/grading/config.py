"""The ``graders:`` configuration: gh-aw's validation (docs/reference/graders.md §2) and the grading plan (§3).

``parse_graders(raw)`` mirrors ``parseGradersFromFrontmatter`` in gh-aw's graders_config.go, with
its exact error messages; ``load_graders(path)`` and ``load_graders_dir(dir)`` read files (see
``graders.grading.config_load``). Deliberate differences are listed in docs/deviations-config.md; the main
one: the trajectory graders of our registry are accepted as built-in ids (gh-aw's stored parser
rejects them without a script, §14.1).
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from graders.grading import registry
from graders.grading.config_errors import (
    GradersConfigError,
    did_you_mean,
    go_key,
    go_quote,
    go_trim,
    go_type,
    unknown_keys,
)
from graders.grading.config_evaluator import inline_evaluator, read_run_evaluator
from graders.grading.config_load import collect_graders, repository_root
from graders.grading.plan import GradingPlan, PlanEntry, default_plan
from schemas.grader import GraderDescription, description_fields

__all__ = ["GradersConfigError", "load_graders", "load_graders_dir", "parse_graders"]

OPERATIONAL_VALUE: Final = "operational-value"
MAX_INLINE_SCRIPT_CHARS: Final = 4096
MAX_EVALUATOR_BYTES: Final = 65536
FORBIDDEN_PATTERNS: Final = ("require(", "import(", "import ", "fetch(", "eval(", "process.exit",
                             "child_process", "execSync", "spawnSync", "Function(")
# A grader entry's fields: gh-aw's GraderDefinition (graders_config.go), all its frontmatter admits.
GRADER_FIELDS: Final = ("enabled", "name", "description", "unit", "direction", "threshold", "max", "min", "config",
                        "run", "script")
_ID_PATTERN_TEXT: Final = "^[a-z][a-z0-9-]{0,63}$"
_ID_PATTERN: Final = re.compile(r"[a-z][a-z0-9-]{0,63}")
_NOT_A_MAP: Final = ("graders must be a map of grader IDs to configuration objects (or {} for all built-in "
                     "defaults). Example:\ngraders:\n  tool-success-rate:\n    enabled: true")
_OV_SOURCE: Final = "graders.operational-value requires exactly one of 'run' or 'script'"
_NO_ENABLED: Final = ("graders configuration has no enabled graders. Remove the graders field to disable "
                      "grading, or set enabled: true on at least one grader")


@dataclass
class GraderDefinition:
    """One validated entry (Go ``GraderDefinition``): the grader's description as configured so
    far (replaced field by field while parsing), plus what only the configuration says."""

    desc: GraderDescription
    enabled: bool | None = None
    run: str = ""
    script: str = ""
    config: dict[str, Any] | None = None

    @property
    def is_enabled(self) -> bool:
        return self.enabled is None or self.enabled

    def describe(self, **values: Any) -> None:
        self.desc = replace(self.desc, **values)


def _builtin_ids() -> tuple[str, ...]:
    """gh-aw's ten built-ins (the registry's ``builtin`` family), in gh-aw's order."""
    return registry.grader_ids("builtin")


def _registry_ids() -> tuple[str, ...]:
    """Every registered grader a plan can hold (gh-aw's built-ins first, then ours, e.g. trajectory), in
    registry order; the observed graders (source ``fleetgrade``) are graded beside every plan, not named in one."""
    return tuple(s.id for s in registry.plan_specs())


def _from_registry(grader_id: str) -> GraderDefinition:
    spec = registry.get(grader_id)
    assert spec is not None
    return GraderDefinition(desc=GraderDescription(**description_fields(spec)))


def _not_builtin(grader_id: str) -> GradersConfigError:
    """gh-aw's message, which lists its ten built-ins; the hint adds the closest id and every id
    one may configure here (the trajectory graders too, which the newest gh-aw lists as well)."""
    ids = _registry_ids()
    close = did_you_mean(grader_id, (*ids, OPERATIONAL_VALUE))
    hint = (f"{close}{' ' if close else '. '}Configurable ids: {', '.join(ids)}, {OPERATIONAL_VALUE} (with run or "
            "script); any other id needs a script")
    return GradersConfigError(f"graders.{grader_id} is not a built-in grader and requires a 'script' field. "
                              f"Built-in graders: {', '.join(_builtin_ids())}", hint=hint)


def valid_run_path(path: str) -> bool:
    """``IsValidOperationalValueEvaluatorRunPath``: repo-relative or ``./`` local, no traversal."""
    if not path or "\\" in path or path.startswith("/"):
        return False
    rest = path[2:] if path.startswith("./") else path
    if not rest or rest.startswith("/"):
        return False
    if any(part in ("", ".", "..") for part in rest.split("/")):
        return False
    return rest.endswith(".sh")


def _number(value: Any) -> float:
    return int(value) if isinstance(value, float) and value.is_integer() and abs(value) < 1e21 else value


def _string_field(entry: dict[str, Any], key: str, gid: str) -> str | None:
    if key not in entry:
        return None
    value = entry[key]
    if not isinstance(value, str):
        raise GradersConfigError(f"graders.{gid}.{key} must be a string, got {go_type(value)}")
    return value


def _parse_fields(d: GraderDefinition, entry: dict[str, Any], gid: str, is_builtin: bool) -> None:
    """``parseGraderEntryFields``: the field checks, in gh-aw's order."""
    if "enabled" in entry:
        if not isinstance(entry["enabled"], bool):
            raise GradersConfigError(f"graders.{gid}.enabled must be a boolean, got {go_type(entry['enabled'])}")
        d.enabled = entry["enabled"]
    for key in ("name", "description", "unit"):
        text = _string_field(entry, key, gid)
        if text is not None:
            d.describe(**{key: text})
    direction = _string_field(entry, "direction", gid)
    if direction is not None:
        if direction not in ("higher_is_better", "lower_is_better"):
            raise GradersConfigError(f"graders.{gid}.direction must be 'higher_is_better' or 'lower_is_better', "
                                     f"got {go_quote(direction)}")
        d.describe(direction=direction)
    for key in ("threshold", "max", "min"):
        if key in entry:
            value = entry[key]
            # gh-aw accepts float64 and int; YAML integers are accepted here too (deviation D3).
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise GradersConfigError(f"graders.{gid}.{key} must be a number, got {go_type(value)}")
            d.describe(**{key: _number(value)})
    if "config" in entry:
        if not isinstance(entry["config"], dict):
            raise GradersConfigError(f"graders.{gid}.config must be an object, got {go_type(entry['config'])}")
        d.config = entry["config"]
    if "run" in entry:
        run = entry["run"]
        if not isinstance(run, str):
            raise GradersConfigError(f"graders.{gid}.run must be a string, got {go_type(run)}")
        run = go_trim(run)
        if gid != OPERATIONAL_VALUE:
            raise GradersConfigError(f"graders.{gid}.run is only supported by the operational-value grader")
        if not valid_run_path(run):
            raise GradersConfigError("graders.operational-value.run must be a workspace-relative or ./ local "
                                     f".sh file, got {go_quote(run)}")
        d.run = run
    if "script" in entry:
        _parse_script(d, entry["script"], gid, is_builtin)


def _parse_script(d: GraderDefinition, script: Any, gid: str, is_builtin: bool) -> None:
    if not isinstance(script, str):
        raise GradersConfigError(f"graders.{gid}.script must be a string, got {go_type(script)}")
    if not go_trim(script):
        raise GradersConfigError(f"graders.{gid}.script must be non-empty when specified")
    if is_builtin:
        raise GradersConfigError(f"graders.{gid} is a built-in grader and cannot have a custom script")
    if gid == OPERATIONAL_VALUE:
        if d.run:
            raise GradersConfigError("graders.operational-value must specify exactly one of 'run' or 'script'")
        size = len(script.encode("utf-8"))
        if size > MAX_EVALUATOR_BYTES:
            raise GradersConfigError("graders.operational-value.script exceeds maximum length of "
                                     f"{MAX_EVALUATOR_BYTES} bytes ({size})")
        d.script = script  # kept untrimmed: its bytes are the frozen evaluator
        return
    script = go_trim(script)
    if len(script) > MAX_INLINE_SCRIPT_CHARS:  # code points, as Go's utf8.RuneCountInString
        raise GradersConfigError(f"graders.{gid}.script exceeds maximum length of {MAX_INLINE_SCRIPT_CHARS} "
                                 f"characters ({len(script)})")
    for pattern in FORBIDDEN_PATTERNS:
        if pattern in script:
            raise GradersConfigError(f"graders.{gid}.script contains forbidden pattern {go_quote(pattern)} — "
                                     "inline grader scripts must be pure functions without side effects")
    d.script = script


def _parse_entry(gid: str, entry_raw: Any, registry_ids: set[str]) -> GraderDefinition:
    is_builtin = gid in registry_ids
    if is_builtin:
        d = _from_registry(gid)
    elif gid == OPERATIONAL_VALUE:
        d = GraderDefinition(desc=GraderDescription(id=gid, name="Operational Value", direction="higher_is_better",
                                                    source=OPERATIONAL_VALUE))
    else:
        d = GraderDefinition(desc=GraderDescription(id=gid, source="inline"))
    if entry_raw is None:
        if gid == OPERATIONAL_VALUE:
            raise GradersConfigError(_OV_SOURCE)
        if not is_builtin:
            raise _not_builtin(gid)
        return d
    if not isinstance(entry_raw, dict):
        raise GradersConfigError(f"graders.{gid} must be a map or null, got {go_type(entry_raw)}. Example:\n"
                                 f"graders:\n  {gid}:\n    enabled: true")
    unknown_keys(entry_raw, GRADER_FIELDS, f"graders.{gid}")  # `threshhold: 0.9` must not pass silently
    _parse_fields(d, {go_key(k): v for k, v in entry_raw.items()}, gid, is_builtin)
    if gid == OPERATIONAL_VALUE and not d.run and not d.script and d.is_enabled:
        raise GradersConfigError(_OV_SOURCE)
    if not is_builtin and gid != OPERATIONAL_VALUE and not d.script and d.is_enabled:
        raise _not_builtin(gid)
    return d


def _validate(defs: dict[str, GraderDefinition]) -> None:
    """``validateGraders``: operational-value range checks, then at least one enabled grader."""
    ov = defs.get(OPERATIONAL_VALUE)
    if ov is not None:
        for name in ("min", "max", "threshold"):
            value = getattr(ov.desc, name)
            if value is not None and not math.isfinite(value):
                raise GradersConfigError(f"graders.operational-value.{name} must be finite")
        low, high, threshold = ov.desc.min, ov.desc.max, ov.desc.threshold
        if low is not None and high is not None and low > high:
            raise GradersConfigError("graders.operational-value.min must not exceed max")
        if threshold is not None and low is not None and threshold < low:
            raise GradersConfigError("graders.operational-value.threshold must not be less than min")
        if threshold is not None and high is not None and threshold > high:
            raise GradersConfigError("graders.operational-value.threshold must not exceed max")
    if not any(d.is_enabled for d in defs.values()):
        raise GradersConfigError(_NO_ENABLED)


def parse_definitions(raw: Any) -> dict[str, GraderDefinition]:
    """Validate a ``graders:`` value (not None) into definitions keyed by id."""
    if not isinstance(raw, dict):
        raise GradersConfigError(_NOT_A_MAP)
    registry_ids = set(_registry_ids())
    if not raw:
        return {gid: _from_registry(gid) for gid in _builtin_ids()}
    defs: dict[str, GraderDefinition] = {}
    seen: dict[str, str] = {}
    for raw_key, entry_raw in raw.items():
        raw_id = go_key(raw_key)
        gid = go_trim(raw_id)
        if gid in seen:
            raise GradersConfigError(f"graders has duplicate id {go_quote(gid)} after normalization. Remove "
                                     f"whitespace variants (for example {go_quote(seen[gid])} and "
                                     f"{go_quote(raw_id)})")
        seen[gid] = raw_id
        if not _ID_PATTERN.fullmatch(gid):
            raise GradersConfigError(f"graders has invalid id {go_quote(gid)}: must match {_ID_PATTERN_TEXT}. "
                                     'Example:\ngraders:\n  my-metric:\n    script: "return { value: '
                                     'trace.toolCalls.length }"')
        defs[gid] = _parse_entry(gid, entry_raw, registry_ids)
    # Built-ins are added only when at least one of gh-aw's built-ins is listed (§2).
    builtin_ids = _builtin_ids()
    if any(gid in defs for gid in builtin_ids):
        for gid in builtin_ids:
            defs.setdefault(gid, _from_registry(gid))
    _validate(defs)
    return defs


def enabled_ids(defs: dict[str, GraderDefinition]) -> list[str]:
    """``EnabledGraderIDs``: registry graders in registry order, then the others sorted."""
    order = _registry_ids()
    known = set(order)
    enabled = {gid for gid, d in defs.items() if d.is_enabled}
    return [g for g in order if g in enabled] + sorted(enabled - known)


@dataclass(frozen=True)
class PlanContext:
    """Where the configuration came from: resolves ``run`` paths and the manifest ``inline`` path."""

    workflow_path: Path | None = None
    repo_root: Path | None = None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _evaluator(d: GraderDefinition, ctx: PlanContext) -> tuple[bytes, str]:
    """The operational-value evaluator bytes and the manifest ``inline`` path (the workflow file,
    repository-relative, when the evaluator is an inline ``script``)."""
    root = ctx.repo_root or (ctx.workflow_path.parent if ctx.workflow_path is not None else None)
    if d.script:
        inline = ""
        if ctx.workflow_path is not None and root is not None:
            try:
                inline = ctx.workflow_path.resolve().relative_to(root.resolve()).as_posix()
            except ValueError:
                inline = ctx.workflow_path.name
        return inline_evaluator(d.script), inline
    if not d.run or ctx.workflow_path is None or root is None:
        return b"", ""  # no file to read (a raw map): the digest is left to the evaluator freezer
    return read_run_evaluator(d.run, ctx.workflow_path, root), ""


def _plan_entry(d: GraderDefinition, ctx: PlanContext) -> PlanEntry:
    digest, inline, evaluator = "", "", b""
    if d.desc.source == "inline" and d.script:
        digest = _sha256(d.script.encode("utf-8"))
    elif d.desc.source == "operational-value" and d.is_enabled:
        evaluator, inline = _evaluator(d, ctx)
        digest = _sha256(evaluator) if evaluator else ""
    return PlanEntry(**description_fields(d.desc), enabled=d.is_enabled, digest=digest, run=d.run, inline=inline,
                     config=d.config or None, script=d.script, evaluator=evaluator)


def build_plan(defs: dict[str, GraderDefinition], ctx: PlanContext | None = None) -> GradingPlan:
    """The manifest (§3): enabled ids in EnabledGraderIDs order, then disabled ids sorted."""
    ctx = ctx or PlanContext()
    first = enabled_ids(defs)
    rest = sorted(gid for gid, d in defs.items() if not d.is_enabled)
    return GradingPlan(tuple(_plan_entry(defs[gid], ctx) for gid in first + rest))


def parse_graders(raw: Any, ctx: PlanContext | None = None) -> GradingPlan | None:
    """A ``graders:`` value to a plan; None when it is absent/null (gh-aw: grading off)."""
    if raw is None:
        return None
    return build_plan(parse_definitions(raw), ctx)


def load_graders(path: str | Path) -> GradingPlan:
    """The plan of one configuration file (``.yaml``/``.yml``/``.json`` or a workflow ``.md``).

    A file without a ``graders`` map gets the default plan (every registered grader): fleetgrade
    grades every run, where gh-aw would emit no grading step (deviation D1).
    """
    p = Path(path)
    try:
        present, raw = collect_graders(p)
        plan = parse_graders(raw, PlanContext(workflow_path=p, repo_root=repository_root(p.parent))) if present else None
    except GradersConfigError as exc:
        exc.path = exc.path or str(p)
        raise
    return plan if plan is not None else default_plan()


_SUFFIXES: Final = (".yaml", ".yml", ".json", ".md")


def load_graders_dir(directory: str | Path) -> dict[str, GradingPlan]:
    """One plan per workflow: ``<name>.yaml|.yml|.json|.md`` in ``directory`` (not recursive).

    Two files for the same workflow name are an error rather than a silent pick.
    """
    d = Path(directory)
    if not d.is_dir():
        raise GradersConfigError(f"graders configuration directory not found: {d}")
    found: dict[str, Path] = {}
    for f in sorted(d.iterdir()):
        if not f.is_file() or f.suffix not in _SUFFIXES:
            continue
        if f.stem in found:
            raise GradersConfigError(f"two graders configurations for workflow {f.stem!r}: "
                                     f"{found[f.stem].name} and {f.name}")
        found[f.stem] = f
    return {name: load_graders(f) for name, f in found.items()}
