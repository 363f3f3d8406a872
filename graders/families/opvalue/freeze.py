"""Freezing the operational-value evaluator and verifying archived copies (docs/reference/graders.md §3, §4.5).

Freezing mirrors gh-aw's ``prepareOperationalValueGrader`` (compile time): exactly one of
``run``/``script``, a Bash shebang, at most 65,536 bytes, UTF-8, and ``bash -n``. Its messages are
the Go ones (``graders.operational-value.<field> …``). Verification mirrors the step's
``archiveOperationalValueEvaluator``: the frozen bytes must hash to the manifest digest.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from graders.families.opvalue.errors import OperationalValueError
from graders.grading.config import valid_run_path
from graders.jsrt.jsonio import JsonError, parse_json
from graders.runs.runfiles import RunFiles

MAX_EVALUATOR_BYTES: Final = 64 * 1024
SHEBANGS: Final = (b"#!/usr/bin/env bash\n", b"#!/bin/bash\n")
SYNTAX_CHECK_TIMEOUT_S: Final = 5.0
EVALUATOR_FILENAME: Final = "operational_value_evaluator.sh"
MANIFEST_FILENAME: Final = "grader_manifest.json"
RESULTS_FILENAME: Final = "grader_results.json"
# Where a run's grader files live: the agent artifact, a flattened download, the usage mirror.
ARCHIVE_DIRS: Final = ("agent/graders", "graders", "usage/graders")
MAX_ARCHIVE_JSON_BYTES: Final = 50 * 1024 * 1024


@dataclass(frozen=True)
class FrozenEvaluator:
    """Exact evaluator bytes, their SHA-256, and the repo-relative file they came from."""

    content: bytes
    digest: str
    source_path: str


def evaluator_digest(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def _quote(text: str) -> str:
    """Go's ``%q`` for the printable paths we quote."""
    return json.dumps(text, ensure_ascii=False)


def bash_syntax_error(content: bytes, timeout_s: float = SYNTAX_CHECK_TIMEOUT_S) -> str | None:
    """``bash -n`` over stdin (as the Go compiler does); None when the syntax is valid.

    Parsing executes nothing, so this runs on the host with an empty environment.
    """
    try:
        proc = subprocess.run(
            ["bash", "-n"], input=content, capture_output=True, timeout=timeout_s, env={}, check=False
        )
    except subprocess.TimeoutExpired:
        return f"bash -n timed out after {round(timeout_s * 1000)}ms"
    except OSError as exc:
        return f"bash -n could not run: {exc}"
    if proc.returncode == 0:
        return None
    message = (proc.stdout + proc.stderr).decode("utf-8", "replace").strip()
    return message or f"exit status {proc.returncode}"


def validate_content(content: bytes, timeout_s: float = SYNTAX_CHECK_TIMEOUT_S) -> str | None:
    """``validateOperationalValueEvaluatorContent``: the error suffix, or None."""
    if len(content) > MAX_EVALUATOR_BYTES:
        return f"exceeds the {MAX_EVALUATOR_BYTES}-byte limit"
    if not content.startswith(SHEBANGS):
        return "must start with a Bash shebang"
    error = bash_syntax_error(content, timeout_s)
    if error is not None:
        return f"has invalid Bash syntax: {error}"
    return None


def _within(base: Path, path: Path) -> bool:
    try:
        path.relative_to(base)
    except ValueError:
        return False
    return True


def resolve_run_path(repo_root: Path, workflow_path: Path, run: str) -> Path:
    """``./x.sh`` is local to the workflow's folder; any other path is relative to the repo root."""
    if run.startswith("./"):
        return Path(os.path.normpath(workflow_path.parent / run[2:]))
    return Path(os.path.normpath(repo_root / run))


def _read_run_file(repo_root: Path, workflow_path: Path, run: str) -> bytes:
    label = f"graders.operational-value.run {_quote(run)}"
    root = Path(os.path.abspath(repo_root))
    path = resolve_run_path(root, Path(os.path.abspath(workflow_path)), run)
    # The lexical check is Go's; the second also refuses a symlinked folder leading outside.
    if not _within(root, path) or not _within(Path(os.path.realpath(root)), Path(os.path.realpath(path.parent))):
        raise OperationalValueError(f"{label} escapes the Git repository")
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise OperationalValueError(f"cannot inspect {label}: {exc}") from exc
    if stat.S_ISLNK(info.st_mode):
        raise OperationalValueError(f"{label} must not be a symbolic link")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise OperationalValueError(f"cannot read {label}: {exc}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OperationalValueError(f"{label} must be a regular file")
        if st.st_size > MAX_EVALUATOR_BYTES:
            raise OperationalValueError(f"{label} exceeds the {MAX_EVALUATOR_BYTES}-byte limit")
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_EVALUATOR_BYTES and (chunk := os.read(fd, MAX_EVALUATOR_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
        content = b"".join(chunks)
    finally:
        os.close(fd)
    if len(content) > MAX_EVALUATOR_BYTES:
        raise OperationalValueError(f"{label} exceeds the {MAX_EVALUATOR_BYTES}-byte limit")
    return content


def freeze_evaluator(
    *,
    run: str = "",
    script: str = "",
    repo_root: str | os.PathLike[str] | None,
    workflow_path: str | os.PathLike[str],
    syntax_timeout_s: float = SYNTAX_CHECK_TIMEOUT_S,
) -> FrozenEvaluator:
    """Freeze the evaluator named by an ``operational-value`` config entry.

    ``repo_root`` is the Git repository holding ``workflow_path`` (None: not in a repository).
    """
    if not run and not script:
        raise OperationalValueError("graders.operational-value requires exactly one of 'run' or 'script'")
    if run and script:
        raise OperationalValueError("graders.operational-value must specify exactly one of 'run' or 'script'")
    if repo_root is None:
        raise OperationalValueError(
            "cannot prepare graders.operational-value: workflow is not inside a Git repository"
        )
    root = Path(repo_root)
    workflow = Path(workflow_path)
    if script:
        # An inline script is stored untrimmed; YAML strings are always valid UTF-8.
        content = script.encode("utf-8")
        error = validate_content(content, syntax_timeout_s)
        if error is not None:
            raise OperationalValueError(f"graders.operational-value.script {error}")
        source = os.path.relpath(os.path.abspath(workflow), os.path.abspath(root))
        return FrozenEvaluator(content, evaluator_digest(content), Path(source).as_posix())
    if not valid_run_path(run):
        raise OperationalValueError(
            f"graders.operational-value.run must be a workspace-relative or ./ local .sh file, got {_quote(run)}"
        )
    content = _read_run_file(root, workflow, run)
    label = f"graders.operational-value.run {_quote(run)}"
    try:
        content.decode("utf-8")
    except UnicodeDecodeError:
        raise OperationalValueError(f"{label} must be valid UTF-8") from None
    error = validate_content(content, syntax_timeout_s)
    if error is not None:
        raise OperationalValueError(f"{label} {error}")
    resolved = resolve_run_path(Path(os.path.abspath(root)), Path(os.path.abspath(workflow)), run)
    return FrozenEvaluator(content, evaluator_digest(content), resolved.relative_to(os.path.abspath(root)).as_posix())


def verify_archived(evaluator: bytes | None, manifest_digest: str | None) -> str:
    """The step's archive check: the frozen bytes must hash to the manifest digest.

    Returns the digest. An empty or absent manifest digest never matches ("expected none").
    """
    if evaluator is None:
        raise OperationalValueError("operational-value evaluator is missing from the execution specification")
    actual = evaluator_digest(evaluator)
    if not manifest_digest or actual != manifest_digest:
        raise OperationalValueError(
            f"operational-value evaluator digest mismatch: expected {manifest_digest or 'none'}, got {actual}"
        )
    return actual


@dataclass(frozen=True)
class ArchivedEvaluator:
    """A run's own archived operational-value grader: manifest entry, frozen bytes, digest."""

    entry: dict[str, Any]
    evaluator: bytes
    digest: str
    manifest_path: str
    evaluator_path: str


def find_archive_file(files: RunFiles, name: str) -> str | None:
    """The first of ``agent/graders/``, ``graders/``, ``usage/graders/`` that holds ``name``."""
    for folder in ARCHIVE_DIRS:
        rel = f"{folder}/{name}"
        if files.exists(rel):
            return rel
    return None


def read_archive_json(files: RunFiles, name: str, what: str) -> tuple[str, Any]:
    rel = find_archive_file(files, name)
    if rel is None:
        raise OperationalValueError(f"cannot read {what}: {name} not found under {', '.join(ARCHIVE_DIRS)}")
    size = files.size(rel) or 0
    if size > MAX_ARCHIVE_JSON_BYTES:
        raise OperationalValueError(f"{what} exceeds the {MAX_ARCHIVE_JSON_BYTES}-byte limit")
    try:
        return rel, parse_json(files.read(rel))
    except JsonError:
        raise OperationalValueError(f"{what} is malformed") from None


def select_manifest_entry(manifest: Any) -> dict[str, Any]:
    """The single enabled ``operational-value`` entry of a ``grader_manifest.json``."""
    graders = manifest.get("graders") if isinstance(manifest, dict) else None
    version = manifest.get("version") if isinstance(manifest, dict) else None
    if not isinstance(graders, list) or not isinstance(version, int) or version <= 0:
        raise OperationalValueError("grader manifest is malformed")
    entries = [g for g in graders if isinstance(g, dict) and g.get("id") == "operational-value"]
    if len(entries) > 1:
        raise OperationalValueError("grader manifest contains duplicate operational-value graders")
    if not entries or entries[0].get("enabled") is not True or entries[0].get("source") != "operational-value":
        raise OperationalValueError("run did not use an enabled operational-value grader")
    return entries[0]


def load_run_archive(files: RunFiles) -> ArchivedEvaluator:
    """Load and verify a run's own archived evaluator against its own manifest."""
    manifest_path, manifest = read_archive_json(files, MANIFEST_FILENAME, "grader manifest")
    entry = select_manifest_entry(manifest)
    evaluator_path = find_archive_file(files, EVALUATOR_FILENAME)
    if evaluator_path is None:
        raise OperationalValueError(
            f"archived operational-value evaluator is missing: {EVALUATOR_FILENAME} not found under "
            f"{', '.join(ARCHIVE_DIRS)}"
        )
    if (files.size(evaluator_path) or 0) > MAX_EVALUATOR_BYTES:
        raise OperationalValueError(
            f"archived operational-value evaluator exceeds the {MAX_EVALUATOR_BYTES}-byte limit"
        )
    content = files.read(evaluator_path)
    if len(content) > MAX_EVALUATOR_BYTES:
        raise OperationalValueError(
            f"archived operational-value evaluator exceeds the {MAX_EVALUATOR_BYTES}-byte limit"
        )
    try:
        content.decode("utf-8")
    except UnicodeDecodeError:
        raise OperationalValueError("archived operational-value evaluator must be valid UTF-8") from None
    if not content.startswith(SHEBANGS):
        raise OperationalValueError("archived operational-value evaluator must start with a Bash shebang")
    digest_value = entry.get("digest")
    digest = verify_archived(content, digest_value if isinstance(digest_value, str) else None)
    return ArchivedEvaluator(entry, content, digest, manifest_path, evaluator_path)
