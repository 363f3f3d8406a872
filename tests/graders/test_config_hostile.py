"""Hostile configuration files are refused in one line and never reach other host files."""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from graders.families.trace_rules.config import load_mapping
from graders.grading.config import load_graders
from graders.grading.config_errors import GradersConfigError
from graders.grading.safeyaml import MAX_YAML_BYTES, YamlLimitError, check_expansion
from pipeline.plans import PlanLoadError, load_trace_config
from tests.conftest import REPO

SECRET = "host-secret-line-8d1f"


def laughs(levels: int = 6, width: int = 10) -> str:
    """A billion-laughs document: ``width ** levels`` nodes once aliases are expanded."""
    lines = ['l0: &l0 "lol"']
    for i in range(1, levels + 1):
        refs = ", ".join(f"*l{i - 1}" for _ in range(width))
        lines.append(f"l{i}: &l{i} [{refs}]")
    return "\n".join(lines) + "\n"


def _one_line_error(path: Path) -> str:
    with pytest.raises(GradersConfigError) as info:
        load_graders(path)
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    return message


def test_billion_laughs_graders_yaml_is_refused(tmp_path):
    path = tmp_path / "graders.yaml"
    path.write_text(laughs())
    assert _one_line_error(path) == f"{path}: YAML refused: aliases expand to more than 200000 nodes"


def test_billion_laughs_in_workflow_frontmatter_is_refused(tmp_path):
    path = tmp_path / "wf.md"
    path.write_text("---\n" + laughs() + "---\nbody\n")
    assert "aliases expand to more than" in _one_line_error(path)


def test_recursive_alias_and_deep_nesting_are_refused(tmp_path):
    path = tmp_path / "graders.yaml"
    path.write_text("a: &a [1, *a]\n")
    assert _one_line_error(path) == f"{path}: YAML refused: recursive alias at line 1"
    path.write_text("a: " + "[" * 3000 + "]" * 3000 + "\n")
    message = _one_line_error(path)
    assert message.startswith(f"{path}: ") and "nested deeper than 100 levels" in message


def test_oversized_file_is_refused_without_being_parsed(tmp_path):
    path = tmp_path / "graders.yaml"
    with open(path, "w") as fh:
        fh.write("x: |\n")
        fh.write(("  " + "y" * 1022 + "\n") * (MAX_YAML_BYTES // 1024 + 2))
    assert _one_line_error(path) == f"{path}: graders configuration refused: larger than {MAX_YAML_BYTES} bytes"


def test_yaml_syntax_errors_are_one_line_without_the_text(tmp_path):
    path = tmp_path / "wf.md"
    path.write_text(f"---\ngraders:\n  x: [{SECRET}\n---\n")
    message = _one_line_error(path)
    assert SECRET not in message
    assert message.startswith(f"{path}: invalid YAML: ") and "(line " in message


def test_expansion_check_counts_shared_nodes_once_per_use():
    node = yaml.compose(laughs(levels=3, width=10))  # 1 + 10 + 100 + 1000 leaves and lists
    check_expansion(node, max_nodes=2000)
    with pytest.raises(YamlLimitError):
        check_expansion(node, max_nodes=1000)


def test_trace_configs_are_bounded_too(tmp_path):
    path = tmp_path / "trace.yaml"
    path.write_text(laughs())
    err = io.StringIO()
    assert load_mapping(path, err)["retry_threshold"] == 3  # fail-open: the defaults
    assert err.getvalue() == (
        "[trace-grader] config load failed (aliases expand to more than 200000 nodes); using defaults\n")
    with pytest.raises(PlanLoadError, match=r"trace\.yaml: YAML refused: aliases expand to more than"):
        load_trace_config(str(path))


# --- imports stay inside the workflow's folder or repository ------------------------------------

@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A host file outside the repository, holding YAML that does not parse."""
    host = tmp_path / "host"
    host.mkdir()
    secret = host / "secret.yaml"
    secret.write_text(f"graders: [{SECRET}\n")
    return secret


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / "shared").mkdir()
    (root / "shared" / "common.yaml").write_text("graders:\n  from-shared:\n    script: return 1\n")
    return root


def _workflow(repo: Path, imports: str) -> Path:
    wf = repo / ".github" / "workflows" / "wf.md"
    wf.write_text(f"---\nimports:\n  - {imports}\n---\n")
    return wf


def test_import_within_the_repository_is_read(repo):
    assert [e.id for e in load_graders(_workflow(repo, "../../shared/common.yaml")).entries] == ["from-shared"]


@pytest.mark.parametrize("how", ["absolute", "relative", "symlink"])
def test_imports_leaving_the_repository_are_refused_unread(repo, outside, how):
    spec = {"absolute": str(outside), "relative": os.path.relpath(outside, repo / ".github" / "workflows"),
            "symlink": "../../shared/link.yaml"}[how]
    (repo / "shared" / "link.yaml").symlink_to(outside)
    message = _one_line_error(_workflow(repo, spec))
    assert message.endswith(f"import {spec!r} is outside the workflow's folder and repository; refused")
    assert SECRET not in message


def test_without_a_repository_imports_stay_in_the_workflow_folder(tmp_path, outside):
    folder = tmp_path / "graders"
    folder.mkdir()
    (folder / "part.yaml").write_text("graders:\n  part:\n    script: return 1\n")
    wf = folder / "wf.md"
    wf.write_text("---\nimports: [part.yaml]\n---\n")
    assert [e.id for e in load_graders(wf).entries] == ["part"]
    wf.write_text("---\nimports: [../host/secret.yaml]\n---\n")
    assert SECRET not in _one_line_error(wf)


def test_cli_refuses_a_bomb_in_one_line(tmp_path):
    path = tmp_path / "graders.yaml"
    path.write_text(laughs())
    run = sorted((REPO / "examples" / "fleet" / "ci-doctor").glob("run-*"))[0]
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "fleetgrade"), "grade", str(run), "--graders", str(path),
                           "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "aliases expand to more than 200000 nodes" in lines[0] and str(path) in lines[0]
