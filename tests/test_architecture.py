"""The production import graph (docs/architecture.md): one-way layers, no cycle, and no
function-level first-party import outside the allowlist below.

An AST walk, so nothing is imported: every ``import``/``from … import`` statement of the
production packages is an edge, at module level or inside a function (an import that is only
deferred still closes a cycle when it runs). ``from a.b import c`` is an edge to ``a.b.c`` when
that is a module, else to ``a.b``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("schemas", "graders", "transforms", "pipeline")

# Lowest first; a module may import its own layer or a lower one. ``graders.stats`` (estimators
# for the report and ``check``) imports nothing first-party: it sits with ``jsrt`` at the bottom
# of the core. ``graders`` itself and its top-level modules (prepare, single_run, replay) grade a
# run end to end over every layer of the core. ``grading`` (the registry, the engine) sits below
# ``formats`` so that input-format readers register in the one registry like every plugin.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("schemas",),
    ("graders.jsrt", "graders.stats"),
    ("graders.runs",),
    ("graders.grading",),
    ("graders.formats",),
    ("graders.families",),
    ("graders.tables",),
    ("graders",),
    ("transforms",),
    ("pipeline",),
)

# Function-level first-party imports that are deliberate, each with why it is deferred. None of
# them may hide a cycle: the cycle check below counts them as edges.
LAZY_IMPORTS: Mapping[tuple[str, str], str] = {
    # The CLI imports a command's module to register its flags, so `fleetgrade <command> --help`
    # and a usage error answer before Beam, DuckDB or the grading core load: a command imports
    # its machinery when it runs (tests/pipeline/test_cli_startup.py).
    ("pipeline.cmd_run", "pipeline.preflight"): "CLI start-up",
    ("pipeline.cmd_run", "pipeline.launch"): "CLI start-up: Beam",
    ("pipeline.cmd_run", "pipeline.plans"): "CLI start-up: the graders' configuration",
    ("pipeline.cmd_run", "pipeline.graph"): "CLI start-up: Beam and every grader family",
    ("pipeline.cmd_run", "pipeline.tables"): "CLI start-up: DuckDB, for the unused graders-file warning",
    ("pipeline.cmd_regrade", "graders.families.opvalue.errors"): "CLI start-up",
    ("pipeline.cmd_regrade", "graders.families.opvalue.output"): "CLI start-up",
    ("pipeline.cmd_regrade", "graders.families.opvalue.regrade"): "CLI start-up",
    ("pipeline.cmd_regrade", "graders.families.opvalue.sandbox"): "CLI start-up",
    ("pipeline.cmd_regrade", "graders.prepare"): "CLI start-up: preprocessing",
    ("pipeline.cmd_regrade", "graders.replay"): "CLI start-up",
    ("pipeline.cmd_regrade", "graders.runs.runfiles"): "CLI start-up",
    ("pipeline.cmd_regrade", "pipeline.regrade_graph"): "CLI start-up: Beam",
    ("pipeline.cmd_regrade", "pipeline.launch"): "CLI start-up: Beam",
    ("pipeline.cmd_sql", "pipeline.tables"): "CLI start-up: DuckDB",
    ("pipeline.cmd_bigquery", "pipeline.bigquery"): "CLI start-up",
    ("pipeline.cmd_check", "transforms.gcs"): "CLI start-up: gs:// only",
    ("pipeline.cmd_report", "pipeline.report.queries"): "CLI start-up: DuckDB",
    ("pipeline.cmd_report", "pipeline.report.render"): "CLI start-up",
    ("pipeline.cmd_report", "pipeline.report.scope"): "CLI start-up",
    ("pipeline.cmd_report", "pipeline.tables"): "CLI start-up: DuckDB",
    ("pipeline.preflight", "transforms.discover"): "CLI start-up: Beam's file systems",
    ("pipeline.options", "pipeline.runners.dask_runner"): "the optional dask extra, for --runner dask only",
    ("pipeline.launch", "transforms.upgrade"): "CLI start-up: Beam's file systems, after the local checks",
}


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    lazy: bool  # inside a function (or a method): runs when called, not on import


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def production_modules(root: Path, packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    return {module_name(p, root): p for pkg in packages for p in sorted((root / pkg).rglob("*.py"))}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> Iterable[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement with whether it sits in a function; ``if TYPE_CHECKING`` blocks
    count as module level (they state a dependency even though they never run)."""

    def walk(node: ast.AST, lazy: bool) -> Iterable[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, lazy
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                yield from walk(child, True)
            elif isinstance(child, ast.If) and _type_checking(child):
                yield from walk(child, False)
            else:
                yield from walk(child, lazy)

    yield from walk(tree, False)


def _resolve(node: ast.Import | ast.ImportFrom, module: str, is_package: bool,
             modules: Mapping[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]


def import_edges(root: Path, packages: Iterable[str] = PACKAGES) -> list[Edge]:
    packages = tuple(packages)
    modules = production_modules(root, packages)
    edges = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, lazy in _imports(tree):
            for target in _resolve(node, name, path.name == "__init__.py", modules):
                if target.split(".")[0] in packages and target != name:
                    edges.append(Edge(name, _known(target, modules), node.lineno, lazy))
    return edges


def _known(target: str, modules: Mapping[str, Path]) -> str:
    """The module an import names, or its nearest enclosing package that exists."""
    while target not in modules and "." in target:
        target = target.rsplit(".", 1)[0]
    return target


def cycles(edges: Iterable[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.source, set()).add(e.target)
        graph.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def layer_of(module: str) -> int:
    """The index in ``LAYERS`` of the longest prefix that names ``module``'s folder."""
    best, best_len = -1, -1
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = i, len(prefix)
    if best < 0:
        raise AssertionError(f"{module} is in no layer: add its folder to LAYERS")
    return best


def layer_violations(edges: Iterable[Edge]) -> list[str]:
    return sorted(f"{e.source}:{e.line} imports {e.target} (a higher layer)"
                  for e in edges if layer_of(e.target) > layer_of(e.source))


def unlisted_lazy_imports(edges: Iterable[Edge], allowed: Mapping[tuple[str, str], str]) -> list[str]:
    return sorted(f"{e.source}:{e.line} imports {e.target} inside a function"
                  for e in edges if e.lazy and (e.source, e.target) not in allowed)


# -- the real tree ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def edges() -> list[Edge]:
    return import_edges(ROOT)


def test_no_import_cycle_at_module_or_function_level(edges: list[Edge]) -> None:
    assert cycles(edges) == []


def test_every_import_goes_to_the_same_or_a_lower_layer(edges: list[Edge]) -> None:
    assert layer_violations(edges) == []


def test_function_level_imports_are_the_listed_deliberate_ones(edges: list[Edge]) -> None:
    assert unlisted_lazy_imports(edges, LAZY_IMPORTS) == []
    used = {(e.source, e.target) for e in edges if e.lazy}
    assert sorted(set(LAZY_IMPORTS) - used) == []  # the list shrinks with the code


def test_the_registry_imports_no_grader_family(edges: list[Edge]) -> None:
    assert {e.target for e in edges if e.source == "graders.grading.registry"} == {"schemas.grader"}


# -- the checks themselves catch what they are for -------------------------------------------

def _tree(tmp_path: Path, files: Mapping[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for pkg in ("schemas", "graders", "graders/grading", "graders/families", "transforms", "pipeline"):
        (tmp_path / pkg).mkdir(parents=True, exist_ok=True)
        (tmp_path / pkg / "__init__.py").touch()
    return tmp_path


def test_a_cycle_hidden_in_a_function_is_found(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "graders/grading/registry.py": "def _load():\n    import graders.families.catalog\n",
        "graders/families/catalog.py": "from graders.families import builtin\n",
        "graders/families/builtin.py": "from graders.grading.registry import register\n",
    })
    found = import_edges(root)
    assert cycles(found) == [["graders.families.builtin", "graders.families.catalog", "graders.grading.registry"]]
    assert unlisted_lazy_imports(found, {}) == [
        "graders.grading.registry:2 imports graders.families.catalog inside a function"]


def test_a_layer_violation_is_found(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "graders/grading/config.py": "from graders.families.builtin import BUILTIN_IDS\n",
        "graders/families/builtin.py": "from schemas.grader import GraderDescription\n",
        "schemas/grader.py": "import dataclasses\n",
        "transforms/grade.py": "from graders.grading import config\n",
    })
    found = import_edges(root)
    assert cycles(found) == []
    assert layer_violations(found) == ["graders.grading.config:1 imports graders.families.builtin (a higher layer)"]


def test_relative_and_type_checking_imports_are_edges(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "transforms/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pipeline import b\n",
        "pipeline/b.py": "from . import c\n",
        "pipeline/c.py": "",
    })
    assert {(e.source, e.target, e.lazy) for e in import_edges(root)} == {
        ("transforms.a", "pipeline.b", False), ("pipeline.b", "pipeline.c", False)}
    assert layer_violations(import_edges(root)) == ["transforms.a:3 imports pipeline.b (a higher layer)"]
