"""Reading ``graders:`` maps from files: YAML, JSON, gh-aw workflow frontmatter, imports.

The values that come out are what gh-aw's Go parser sees before validation
(``graders_config.go``): plain maps, lists, strings, numbers, booleans and nulls. YAML is read with
the YAML 1.2 core schema (only ``true``/``false`` are booleans, dates stay strings), as gh-aw's YAML
library does, so ``on:`` or ``yes`` do not silently turn into booleans.

Configuration files are untrusted enough to be bounded (safeyaml.py: bytes, alias expansion,
depth), and ``imports:`` stay inside the workflow's folder or its repository: an import that
resolves (symlinks followed) anywhere else is refused before it is read, so no line of a host
file can reach an error message.
"""

from __future__ import annotations

import json
import re
from collections import deque
from pathlib import Path
from typing import Any

import yaml

from graders.grading.config_errors import GradersConfigError, did_you_mean, go_key, unknown_keys
from graders.grading.safeyaml import BoundedLoaderMixin, YamlLimitError, describe, read_capped_text


class _Yaml12Loader(BoundedLoaderMixin, yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core-schema scalars and duplicate-key errors."""


_Yaml12Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag not in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:int",
                                                  "tag:yaml.org,2002:float", "tag:yaml.org,2002:timestamp")]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.copy().items()
}
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
    list("-+0123456789"))
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
               r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+0123456789."))


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    if text.startswith("0o"):
        return int(text[2:], 8)
    return int(text, 0) if text.startswith("0x") else int(text, 10)


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    out: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)  # type: ignore[no-untyped-call]
        if isinstance(key, (list, dict)):
            raise GradersConfigError(f"unsupported YAML mapping key at line {key_node.start_mark.line + 1}")
        if key in out:
            # gh-aw's YAML library refuses duplicate keys; PyYAML would keep the last one.
            raise GradersConfigError(f'mapping key "{key}" already defined at line {key_node.start_mark.line + 1}')
        out[key] = loader.construct_object(value_node, deep=True)  # type: ignore[no-untyped-call]
    return out


_Yaml12Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_Yaml12Loader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)


def load_yaml(text: str, label: str, line_offset: int = 0) -> Any:
    try:
        return yaml.load(text, Loader=_Yaml12Loader)  # a SafeLoader subclass
    except (yaml.YAMLError, RecursionError) as exc:
        raise GradersConfigError(f"{label}: invalid YAML: {describe(exc, line_offset)}") from exc
    except YamlLimitError as exc:
        raise GradersConfigError(f"{label}: YAML refused: {exc}") from exc


def split_frontmatter(text: str, label: str) -> Any:
    """The YAML between the leading ``---`` lines (gh-aw's ExtractFrontmatterFromContent)."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return {}
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            doc = load_yaml("\n".join(lines[1:end]), label, line_offset=1)
            return {} if doc is None else doc
    raise GradersConfigError(f"{label}: frontmatter not properly closed")


def read_document(path: Path, given: bool = True) -> Any:
    """A config file as data: the frontmatter of a ``.md``, else the YAML/JSON document. A file
    ``given`` as the configuration (not an import) may not be empty."""
    label = str(path)
    try:
        text = read_capped_text(path)
    except YamlLimitError as exc:
        raise GradersConfigError(f"{label}: graders configuration refused: {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise GradersConfigError(f"{label}: cannot read the graders configuration: {describe(exc)}") from exc
    if given and not text.strip():
        raise _empty(label)
    if path.suffix == ".md":
        return split_frontmatter(text, label)
    if path.suffix == ".json":
        try:
            return json.loads(text)
        except ValueError as exc:
            raise GradersConfigError(f"{label}: invalid JSON: {exc}") from exc
    doc = load_yaml(text, label)
    if doc is None and given:  # only comments
        raise _empty(label)
    return doc


def _empty(label: str) -> GradersConfigError:
    """A file given as configuration that configures nothing (a default would hide the mistake)."""
    return GradersConfigError("the graders configuration is empty (nothing but comments or blank lines); "
                              "give a graders map, or {} for every built-in", path=label)


def deep_merge(dst: dict[str, Any], src: dict[str, Any]) -> dict[str, Any]:
    """gh-aw ``deepMergeMaps``: maps merge recursively, anything else replaces."""
    for key, value in src.items():
        current = dst.get(key)
        if key in dst and isinstance(current, dict) and isinstance(value, dict):
            dst[key] = deep_merge(current, value)
        else:
            dst[key] = value
    return dst


def repository_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` holding ``.git``."""
    for parent in (start.resolve(), *start.resolve().parents):
        if (parent / ".git").exists():
            return parent
    return None


def import_roots(path: Path) -> list[Path]:
    """Where a workflow's imports may live: its own folder and its repository's root."""
    roots = [path.parent.resolve()]
    repo = repository_root(path.parent)
    if repo is not None:
        roots.append(repo)
    return roots


# An import's fields in gh-aw's frontmatter schema: a path with inputs, or `uses` with `with`
# (their values are the imported workflow's inputs, which a graders map does not use).
IMPORT_FIELDS = ("path", "inputs", "uses", "with")
DOCUMENT_FIELDS = ("graders", "imports")  # a YAML/JSON file that is not the graders map itself


def _import_paths(doc: Any, base: Path, label: str, roots: list[Path]) -> list[Path]:
    raw = doc.get("imports") if isinstance(doc, dict) else None
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise GradersConfigError(f"{label}: imports must be a list of paths")
    out = []
    for i, item in enumerate(raw):
        if isinstance(item, dict):
            _unknown_in(label, item, IMPORT_FIELDS, f"imports[{i}]")
        spec = (item.get("path") or item.get("uses")) if isinstance(item, dict) else item
        if not isinstance(spec, str) or not spec.strip():
            raise GradersConfigError(f"{label}: invalid import {item!r}")
        # "file.md#Section" imports a section of the markdown; the frontmatter is the same file's.
        target = (base / spec.strip().split("#", 1)[0]).resolve()  # symlinks followed: no escape
        if not any(target.is_relative_to(root) for root in roots):
            raise GradersConfigError(
                f"{label}: import {spec.strip()!r} is outside the workflow's folder and repository; refused"
            )
        out.append(target)
    return out


def _graders_of(doc: Any, whole_map_allowed: bool) -> tuple[bool, Any]:
    """(present, value) of a document's graders map."""
    if isinstance(doc, dict) and "graders" in doc:
        return True, doc["graders"]
    if whole_map_allowed and doc is not None:
        return True, doc  # a non-map here fails validation with gh-aw's "must be a map" message
    return False, None


def _unknown_in(label: str, found: dict[Any, Any], allowed: tuple[str, ...], where: str) -> None:
    """``unknown_keys`` in the file ``label``, its error naming the file."""
    try:
        unknown_keys(found, allowed, where)
    except GradersConfigError as exc:
        exc.path = label
        raise


def _check_top_level(doc: Any, path: Path, whole_map: bool) -> None:
    """What gh-aw's schema would refuse at a file's top level, before anything is read from it."""
    if not isinstance(doc, dict):
        return
    label = str(path)
    if path.suffix == ".md":  # a workflow's frontmatter: only a near miss of `graders` is ours to catch
        if "graders" not in doc:
            for key in doc:
                hint = did_you_mean(go_key(key), ["graders"])
                if hint:
                    raise GradersConfigError(f"the frontmatter has no graders map but has {go_key(key)!r}{hint}",
                                             path=label)
        return
    if not whole_map:
        _unknown_in(label, doc, DOCUMENT_FIELDS, "the document")
        return
    for key in doc:  # the graders map itself: a misspelt `graders:` or `imports:` is no grader id
        hint = did_you_mean(go_key(key), DOCUMENT_FIELDS)
        if hint and go_key(key) not in DOCUMENT_FIELDS:
            raise GradersConfigError(f"{go_key(key)!r} is neither a grader id nor a field of the document{hint}",
                                     path=label)


def collect_graders(path: Path) -> tuple[bool, Any]:
    """The workflow's graders map with its imports merged in (gh-aw
    ``mergeImportedGradersFrontmatter``); ``(False, None)`` when no graders are configured.

    Imports are processed breadth-first in declaration order, each file once. A plain YAML/JSON
    file may hold the graders map itself or a document with a ``graders`` key (and ``imports``).
    """
    roots = import_roots(path)
    doc = read_document(path)
    whole = path.suffix != ".md" and not (isinstance(doc, dict) and ("graders" in doc or "imports" in doc))
    _check_top_level(doc, path, whole)
    present, own = _graders_of(doc, whole)
    imported: list[dict[str, Any]] = []
    seen = {path.resolve()}
    queue = deque(_import_paths(doc, path.parent, str(path), roots))
    while queue:
        imp = queue.popleft()
        if imp in seen:
            continue
        seen.add(imp)
        if not imp.is_file():
            raise GradersConfigError(f"{path}: imported file not found: {imp}")
        sub = read_document(imp, given=False)
        _, value = _graders_of(sub, False)
        if isinstance(value, dict):
            imported.append(value)
        queue.extend(_import_paths(sub, imp.parent, str(imp), roots))
    if not imported:
        return present, own
    merged: dict[str, Any] = {}
    for value in imported:
        merged = deep_merge(merged, json.loads(json.dumps(value)))
    if isinstance(own, dict):
        merged = deep_merge(merged, own)
    if not merged:
        return present, own
    return True, merged
