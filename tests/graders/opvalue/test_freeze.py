"""Freezing, archive verification and loading a run's own archive."""

from __future__ import annotations

import hashlib
import os

import orjson
import pytest

from graders.families.opvalue.errors import OperationalValueError
from graders.families.opvalue.freeze import (
    MAX_EVALUATOR_BYTES,
    freeze_evaluator,
    load_run_archive,
    verify_archived,
)
from graders.runs.runfiles import memory_run_files

GOOD = "#!/usr/bin/env bash\necho '[{\"id\":\"v\",\"value\":1}]'\n"


@pytest.fixture
def repo(tmp_path):
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "graders").mkdir()
    wf = tmp_path / ".github" / "workflows" / "daily.md"
    wf.write_text("---\n---\n")
    return tmp_path, wf


def freeze_error(**kw) -> str:
    with pytest.raises(OperationalValueError) as info:
        freeze_evaluator(**kw)
    return str(info.value)


def test_inline_script_is_frozen_untrimmed_with_its_digest(repo):
    root, wf = repo
    frozen = freeze_evaluator(script=GOOD + "  \n", repo_root=root, workflow_path=wf)
    assert frozen.content == (GOOD + "  \n").encode()
    assert frozen.digest == hashlib.sha256(frozen.content).hexdigest()
    assert frozen.source_path == ".github/workflows/daily.md"


def test_exactly_one_of_run_or_script(repo):
    root, wf = repo
    assert freeze_error(repo_root=root, workflow_path=wf) == (
        "graders.operational-value requires exactly one of 'run' or 'script'"
    )
    assert freeze_error(run="a.sh", script=GOOD, repo_root=root, workflow_path=wf) == (
        "graders.operational-value must specify exactly one of 'run' or 'script'"
    )
    assert freeze_error(script=GOOD, repo_root=None, workflow_path=wf) == (
        "cannot prepare graders.operational-value: workflow is not inside a Git repository"
    )


def test_script_content_rules(repo):
    root, wf = repo
    assert freeze_error(script="#!/bin/sh\necho\n", repo_root=root, workflow_path=wf) == (
        "graders.operational-value.script must start with a Bash shebang"
    )
    assert freeze_error(script="#!/bin/bash\r\necho\n", repo_root=root, workflow_path=wf).endswith(
        "must start with a Bash shebang"
    )
    big = "#!/bin/bash\n" + "#" * (MAX_EVALUATOR_BYTES - 12 + 1)
    assert freeze_error(script=big, repo_root=root, workflow_path=wf) == (
        "graders.operational-value.script exceeds the 65536-byte limit"
    )
    exact = "#!/bin/bash\n" + "#" * (MAX_EVALUATOR_BYTES - 12)
    assert len(freeze_evaluator(script=exact, repo_root=root, workflow_path=wf).content) == MAX_EVALUATOR_BYTES
    message = freeze_error(script="#!/bin/bash\nif then\n", repo_root=root, workflow_path=wf)
    assert message.startswith("graders.operational-value.script has invalid Bash syntax: ")
    assert "syntax error" in message


def test_run_paths_resolve_against_workflow_dir_or_repo_root(repo):
    root, wf = repo
    (root / ".github" / "graders" / "value.sh").write_text(GOOD)
    (root / ".github" / "workflows" / "local.sh").write_text(GOOD)
    frozen = freeze_evaluator(run=".github/graders/value.sh", repo_root=root, workflow_path=wf)
    assert frozen.content == GOOD.encode() and frozen.source_path == ".github/graders/value.sh"
    local = freeze_evaluator(run="./local.sh", repo_root=root, workflow_path=wf)
    assert local.source_path == ".github/workflows/local.sh"


def test_run_file_checks(repo, tmp_path_factory):
    root, wf = repo
    graders = root / ".github" / "graders"
    outside = tmp_path_factory.mktemp("outside") / "evil.sh"
    outside.write_text(GOOD)
    os.symlink(outside, graders / "link.sh")
    assert freeze_error(run=".github/graders/link.sh", repo_root=root, workflow_path=wf) == (
        'graders.operational-value.run ".github/graders/link.sh" must not be a symbolic link'
    )
    for bad in ("./../../../x.sh", "/etc/x.sh", "a\\b.sh", "./", "a//b.sh", "x.bash", "./.sh/."):
        assert freeze_error(run=bad, repo_root=root, workflow_path=wf) == (
            f"graders.operational-value.run must be a workspace-relative or ./ local .sh file, got {orjson.dumps(bad).decode()}"
        )
    (graders / "dir.sh").mkdir()
    assert freeze_error(run=".github/graders/dir.sh", repo_root=root, workflow_path=wf).endswith(
        "must be a regular file"
    )
    assert "cannot inspect" in freeze_error(run=".github/graders/none.sh", repo_root=root, workflow_path=wf)
    (graders / "latin1.sh").write_bytes(b"#!/bin/bash\necho caf\xe9\n")
    assert freeze_error(run=".github/graders/latin1.sh", repo_root=root, workflow_path=wf).endswith(
        "must be valid UTF-8"
    )
    (graders / "big.sh").write_bytes(b"#!/bin/bash\n" + b"#" * MAX_EVALUATOR_BYTES)
    assert freeze_error(run=".github/graders/big.sh", repo_root=root, workflow_path=wf).endswith(
        "exceeds the 65536-byte limit"
    )
    os.symlink(outside.parent, graders / "linkdir")
    assert freeze_error(run=".github/graders/linkdir/evil.sh", repo_root=root, workflow_path=wf).endswith(
        "escapes the Git repository"
    )


def test_verify_archived_messages():
    content = GOOD.encode()
    digest = hashlib.sha256(content).hexdigest()
    assert verify_archived(content, digest) == digest
    with pytest.raises(OperationalValueError, match=r"^operational-value evaluator is missing from the execution specification$"):
        verify_archived(None, digest)
    with pytest.raises(OperationalValueError) as info:
        verify_archived(content + b"#", digest)
    actual = hashlib.sha256(content + b"#").hexdigest()
    assert str(info.value) == f"operational-value evaluator digest mismatch: expected {digest}, got {actual}"
    with pytest.raises(OperationalValueError) as info:
        verify_archived(content, "")
    assert str(info.value) == f"operational-value evaluator digest mismatch: expected none, got {digest}"


def _manifest(digest: str, enabled: bool = True) -> bytes:
    return orjson.dumps({"version": 1, "graders": [
        {"id": "tool-success-rate", "name": "Tool Success Rate", "source": "builtin", "enabled": True},
        {"id": "operational-value", "name": "Operational Value", "source": "operational-value",
         "enabled": enabled, "direction": "higher_is_better", "digest": digest, "run": "x.sh"},
    ]})


@pytest.mark.parametrize("folder", ["agent/graders", "graders", "usage/graders"])
def test_load_run_archive_from_each_layout(folder):
    content = GOOD.encode()
    digest = hashlib.sha256(content).hexdigest()
    files = memory_run_files({f"{folder}/grader_manifest.json": _manifest(digest),
                              f"{folder}/operational_value_evaluator.sh": content})
    archive = load_run_archive(files)
    assert archive.evaluator == content and archive.digest == digest
    assert archive.entry["id"] == "operational-value"


def test_load_run_archive_errors():
    content = GOOD.encode()
    digest = hashlib.sha256(content).hexdigest()
    with pytest.raises(OperationalValueError, match=r"^cannot read grader manifest: grader_manifest.json not found"):
        load_run_archive(memory_run_files({}))
    with pytest.raises(OperationalValueError, match=r"^grader manifest is malformed$"):
        load_run_archive(memory_run_files({"agent/graders/grader_manifest.json": b"{nope"}))
    with pytest.raises(OperationalValueError, match="did not use an enabled operational-value grader"):
        load_run_archive(memory_run_files({"agent/graders/grader_manifest.json": _manifest(digest, False)}))
    with pytest.raises(OperationalValueError, match="archived operational-value evaluator is missing"):
        load_run_archive(memory_run_files({"agent/graders/grader_manifest.json": _manifest(digest)}))
    tampered = memory_run_files({"agent/graders/grader_manifest.json": _manifest(digest),
                                 "agent/graders/operational_value_evaluator.sh": content + b"curl evil\n"})
    with pytest.raises(OperationalValueError, match=f"^operational-value evaluator digest mismatch: expected {digest}, got "):
        load_run_archive(tampered)
