"""docs/architecture.md's worked example runs: its grader file and its test, as written there."""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from graders.grading import registry

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Adding a grader"


def example_blocks() -> dict[str, str]:
    """The section's ``python`` blocks by the path in their first line (``# path``)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    return {block.split("\n", 1)[0].removeprefix("# ").strip(): block for block in blocks}


@pytest.fixture
def scratch_registry() -> Iterator[registry.Registry]:
    """The process's registry, with whatever the test registers taken out again afterwards."""
    registry.REGISTRY.load()
    saved = {kind: dict(table) for kind, table in registry.REGISTRY._plugins.items()}
    try:
        yield registry.REGISTRY
    finally:
        registry.REGISTRY._plugins.clear()
        registry.REGISTRY._plugins.update(saved)


def _run_as_module(name: str, path: Path, source: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module  # dataclasses and the like look their module up while it runs
    try:
        exec(compile(source, str(path), "exec"), module.__dict__)
    finally:
        del sys.modules[name]
    return module


def test_the_worked_example_registers_a_grader_that_grades_real_runs(scratch_registry: registry.Registry) -> None:
    blocks = example_blocks()
    assert list(blocks) == ["graders/families/tool_usage.py", "tests/graders/test_tool_usage.py"]
    before = scratch_registry.grader_ids()
    _run_as_module("graders.families.tool_usage", ROOT / "graders/families/tool_usage.py",
                   blocks["graders/families/tool_usage.py"])
    assert scratch_registry.grader_ids() == (*before, "trace-tool-calls")

    tests = _run_as_module("tests.graders.test_tool_usage", ROOT / "tests/graders/test_tool_usage.py",
                           blocks["tests/graders/test_tool_usage.py"])
    names = [n for n in vars(tests) if n.startswith("test_")]
    assert names
    for name in names:
        getattr(tests, name)()


def test_the_example_is_gone_after_its_test() -> None:
    assert registry.get("trace-tool-calls") is None
