"""The demo, as `make demo` makes it: ``examples/`` and ``demo-output/`` graded once per session.

The Makefile's demo ``run`` line is read back, so the tests grade exactly what `make demo` grades.
"""

from __future__ import annotations

import importlib.util
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO

EXE = str(Path(sys.executable).parent / "fleetgrade")
TIMEOUT = 300  # a loaded 2-core machine; a command that hangs must not hang the suite


def make_fleet() -> ModuleType:
    """examples/make_fleet.py, the demo fleet's generator (a script, not a package)."""
    spec = importlib.util.spec_from_file_location("make_fleet", REPO / "examples" / "make_fleet.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CHANGE_DATE: str = make_fleet().CHANGE_DATE  # the demo's planted change


def run_fleetgrade(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=TIMEOUT)


def makefile_lines(target: str) -> list[str]:
    """The recipe lines of a Makefile target, tabs stripped."""
    lines = (REPO / "Makefile").read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"{target}:"))
    recipe = []
    for ln in lines[start + 1:]:
        if not ln.startswith("\t"):
            break
        recipe.append(ln.strip())
    return recipe


def demo_target_args() -> list[str]:
    """The demo target's `fleetgrade run` arguments, `$(OUT)` as demo-output."""
    line = next(ln for ln in makefile_lines("demo") if "fleetgrade run " in ln)
    return ["demo-output" if a == "$(OUT)" else a for a in shlex.split(line.split("fleetgrade", 1)[1])]


@pytest.fixture(scope="session")
def demo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder laid out like the checkout after `make demo`: examples/ and demo-output/ (not to be
    written to: copy it first)."""
    root = tmp_path_factory.mktemp("demo")
    shutil.copytree(REPO / "examples", root / "examples")
    r = run_fleetgrade(demo_target_args(), root)
    assert r.returncode == 0, r.stderr
    return root
