"""Reading the operational-value evaluator for the manifest digest (gh-aw
``prepareOperationalValueGrader``, graders_operational_value.go), with its messages.

Only the file checks live here (symbolic link, regular file, size, UTF-8, Bash shebang); the Bash
syntax check and the sandboxed run belong to ``graders.families.opvalue``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final

from graders.grading.config_errors import GradersConfigError, go_quote

MAX_EVALUATOR_BYTES: Final = 64 * 1024
SHEBANGS: Final = ("#!/usr/bin/env bash\n", "#!/bin/bash\n")


def _os_error(op: str, path: Path, exc: OSError) -> str:
    # Go's *PathError text: "lstat /abs/path: no such file or directory".
    return f"{op} {path}: {(exc.strerror or str(exc)).lower()}"


def check_content(content: str) -> str | None:
    """``validateOperationalValueEvaluatorContent`` minus the Bash syntax check."""
    if len(content.encode("utf-8", "surrogatepass")) > MAX_EVALUATOR_BYTES:
        return f"exceeds the {MAX_EVALUATOR_BYTES}-byte limit"
    if not content.startswith(SHEBANGS):
        return "must start with a Bash shebang"
    return None


def inline_evaluator(script: str) -> bytes:
    problem = check_content(script)
    if problem:
        raise GradersConfigError(f"graders.operational-value.script {problem}")
    return script.encode("utf-8")


def resolve_run(run: str, workflow_path: Path, repo_root: Path) -> Path:
    """``./x.sh`` is next to the workflow file; any other path is from the repository root."""
    if run.startswith("./"):
        return workflow_path.parent / run[2:]
    return repo_root / run


def read_run_evaluator(run: str, workflow_path: Path, repo_root: Path) -> bytes:
    path = resolve_run(run, workflow_path, repo_root).absolute()
    q = go_quote(run)
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise GradersConfigError(f"cannot inspect graders.operational-value.run {q}: "
                                 f"{_os_error('lstat', path, exc)}") from exc
    if stat.S_ISLNK(info.st_mode):
        raise GradersConfigError(f"graders.operational-value.run {q} must not be a symbolic link")
    if not stat.S_ISREG(info.st_mode):
        raise GradersConfigError(f"graders.operational-value.run {q} must be a regular file")
    if info.st_size > MAX_EVALUATOR_BYTES:
        raise GradersConfigError(f"graders.operational-value.run {q} exceeds the {MAX_EVALUATOR_BYTES}-byte limit")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise GradersConfigError(f"cannot read graders.operational-value.run {q}: "
                                 f"{_os_error('read', path, exc)}") from exc
    try:
        content = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GradersConfigError(f"graders.operational-value.run {q} must be valid UTF-8") from exc
    problem = check_content(content)
    if problem:
        raise GradersConfigError(f"graders.operational-value.run {q} {problem}")
    return data
