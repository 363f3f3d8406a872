"""``tools/venv.sh`` (``make install``): which interpreter builds ``.venv``, and when it is rebuilt.

Each test runs the script's ``--plan`` mode in a scratch folder with its own pyproject.toml, so the
supported range is the test's, not the project's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "venv.sh"
VERSION = ".".join(map(str, sys.version_info[:3]))
MINOR = sys.version_info[1]
# The interpreter itself, not this test run's virtualenv.
BASE = getattr(sys, "_base_executable", sys.executable)


def plan(folder: Path, requires: str, python: str = "", venv: str = "venv") -> subprocess.CompletedProcess[str]:
    (folder / "pyproject.toml").write_text(f'[project]\nname = "x"\nrequires-python = "{requires}"\n')
    (folder / "setup.py").write_text("")
    env = dict(os.environ, PYTHON=python, VENV=venv, PYENV_ROOT=str(folder / "no-pyenv"))
    return subprocess.run(["sh", str(SCRIPT), "--plan"], cwd=folder, env=env, capture_output=True, text=True,
                          check=False, timeout=120)


def supported() -> str:
    return f">=3.{MINOR},<3.{MINOR + 1}"


def test_no_venv_is_created_with_the_named_interpreter(tmp_path):
    r = plan(tmp_path, supported(), python=BASE)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:2] == ["create", VERSION]
    assert not (tmp_path / "venv").exists(), "--plan changes nothing"


def test_an_interpreter_outside_requires_python_is_refused_by_name(tmp_path):
    r = plan(tmp_path, f">=3.{MINOR + 1},<3.{MINOR + 2}", python=BASE)
    assert r.returncode == 1
    assert f"PYTHON={BASE} cannot be used: {BASE} is Python {VERSION}; fleetgrade needs Python " \
           f">=3.{MINOR + 1},<3.{MINOR + 2}" in r.stderr


def test_without_any_supported_interpreter_it_says_what_to_install(tmp_path):
    r = plan(tmp_path, ">=3.99,<3.100")
    assert r.returncode == 1
    assert "no supported Python found: fleetgrade needs Python >=3.99,<3.100 (python3 " in r.stderr
    assert "pyenv install" in r.stderr and "make PYTHON=" in r.stderr


def test_a_missing_interpreter_is_named(tmp_path):
    r = plan(tmp_path, supported(), python=str(tmp_path / "python3.42"))
    assert r.returncode == 1
    assert f"{tmp_path / 'python3.42'} not found" in r.stderr


def test_a_venv_of_the_same_interpreter_is_kept_and_only_reinstalled(tmp_path):
    subprocess.run([BASE, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True, timeout=120)
    r = plan(tmp_path, supported())
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:2] == ["install", VERSION], "no stamp yet: install into the kept venv"


def test_a_venv_of_an_unsupported_or_broken_interpreter_is_rebuilt(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("#!/bin/sh\nexit 1\n")
    (venv / "bin" / "python").chmod(0o755)
    r = plan(tmp_path, supported(), python=BASE)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:2] == ["rebuild", VERSION]


@pytest.mark.parametrize("other", ["3.11", "3.12", "3.13"])
def test_naming_another_interpreter_rebuilds_the_venv(tmp_path, other):
    candidates = [Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions",
                  Path("/usr/bin")]
    found = [p for c in candidates for p in sorted(c.glob(f"{other}*/bin/python3")) + sorted(c.glob(f"python{other}"))]
    if other == f"3.{MINOR}" or not found:
        pytest.skip(f"no Python {other} other than this one on this machine")
    subprocess.run([BASE, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True, timeout=120)
    r = plan(tmp_path, ">=3.11,<3.14", python=str(found[0]))
    assert r.returncode == 0, r.stderr
    verb, version = r.stdout.split()[:2]
    assert verb == "rebuild" and version.startswith(other + ".")
