"""The README's snippets and commands, run as written against the demo's output.

- Every ```python block reads ``grader_results``; each is run as written and with every other
  table's name in its place, and must give the table's rows with ``date`` typed as a date.
- Every ``fleetgrade`` line of a ```sh block is run as pasted: by bash, after the README's own
  line that puts ``fleetgrade`` on the PATH (``. .venv/bin/activate``) and with nothing else putting
  it there, in a folder laid out like the checkout after ``make demo`` (``examples/``,
  ``demo-output/``, ``.venv``). It must exit 0, or the status its comment announces (``# exits 1: …``).
  ``make`` lines are skipped (they are what builds that folder); a block that needs the network or
  a cloud project is marked ``<!-- not-run -->`` just above it, and those are counted.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from schemas.tables import public_tables
from tests.conftest import REPO
from tests.helpers.demo import demo_root, run_fleetgrade

__all__ = ["demo_root"]  # the fixture

README = REPO / "README.md"
NOT_RUN = "<!-- not-run -->"
# The README's not-run blocks: `gh aw logs`, the Dataflow job.
NOT_RUN_BLOCKS = 2
VENV = Path(sys.executable).parent.parent  # the .venv `make demo` makes, which `activate` belongs to

FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[a-z]*)[ \t]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
                   re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Block:
    lang: str
    body: str
    line: int
    not_run: bool


def readme_blocks(text: str) -> list[Block]:
    blocks = []
    for m in FENCE.finditer(text):
        before = [ln.strip() for ln in text[: m.start()].splitlines() if ln.strip()]
        body = "\n".join(ln[len(m["indent"]):] for ln in m["body"].splitlines())
        blocks.append(Block(m["lang"], body, text.count("\n", 0, m.start()) + 1,
                            bool(before) and before[-1] == NOT_RUN))
    return blocks


def shell_commands(block: Block) -> list[tuple[int, str]]:
    """The block's commands and their README line: comment lines dropped, continuations joined."""
    commands, current, start = [], "", 0
    for i, raw in enumerate(block.body.splitlines()):
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if not current:
            start = block.line + 1 + i
        current += line[:-1] + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            commands.append((start, current))
            current = ""
    return commands


def expected_status(command: str) -> int:
    """0, or N when the line's comment says ``# exits N``."""
    found = re.search(r"#\s*exits (\d+)", command)
    return int(found[1]) if found else 0


BLOCKS = readme_blocks(README.read_text(encoding="utf-8"))
PYTHON = [b for b in BLOCKS if b.lang == "python"]
SHELL = [b for b in BLOCKS if b.lang == "sh"]
SOURCED = [(n, c) for b in SHELL if not b.not_run for n, c in shell_commands(b) if c.split()[0] == "."]
FLEETGRADE_LINES = [(n, c) for b in SHELL if not b.not_run for n, c in shell_commands(b)
                    if c.split()[0] == "fleetgrade"]


# ---------------------------------------------------------------------------------------------
# The demo output, as `make demo` writes it, plus the observations table (written by `regrade`).


@pytest.fixture(scope="session")
def regraded_root(demo_root, tmp_path_factory) -> Path:
    """The demo folder after a `fleetgrade regrade`: the only way to an `observations` table.
    Apart from `demo_root`, whose dead letters stay all undated, as `make demo` leaves them."""
    root = tmp_path_factory.mktemp("readme-regraded")
    shutil.copytree(demo_root / "examples", root / "examples")
    shutil.copytree(demo_root / "demo-output", root / "demo-output")
    r = run_fleetgrade(["regrade", "--input", "examples/fleet", "--output", "demo-output",
                        "--evidence-at", "2026-12-07T00:00:00Z"], root)
    assert r.returncode == 0, r.stderr
    return root


def partition_rows(table_dir: Path) -> tuple[int, int]:
    """(rows, undated rows) counted from the partition files themselves."""
    rows = undated = 0
    for f in table_dir.glob("*/*/*.parquet"):
        n = pq.read_metadata(f).num_rows
        rows += n
        undated += n if f.parent.name == "date=__HIVE_DEFAULT_PARTITION__" else 0
    return rows, undated


# ---------------------------------------------------------------------------------------------
# Python snippets


def _pyarrow(ns: dict[str, Any]) -> tuple[str, int, int]:
    table = ns["table"]
    return str(table.schema.field("date").type), table.num_rows, table.column("date").null_count


def _polars(ns: dict[str, Any]) -> tuple[str, int, int]:
    df = ns["df"]
    return str(df.schema["date"]), df.height, df["date"].null_count()


def _duckdb(ns: dict[str, Any]) -> tuple[str, int, int]:
    rel = ns["rel"]
    rows = rel.fetchall()
    i, n = rel.columns.index("date"), rel.columns.index("n")
    return str(rel.types[i]), sum(r[n] for r in rows), sum(r[n] for r in rows if r[i] is None)


# library → (what its snippet leaves behind, read back; the date type's spelling there)
READERS = {"pyarrow": (_pyarrow, "date32[day]"), "polars": (_polars, "Date"), "duckdb": (_duckdb, "DATE")}


def library(block: Block) -> str:
    found = [lib for lib in READERS if re.search(rf"^import {lib}\b", block.body, re.MULTILINE)]
    assert len(found) == 1, f"README.md:{block.line}: a python block imports exactly one of {list(READERS)}"
    return found[0]


def test_the_readme_has_a_snippet_per_reader():
    assert sorted(library(b) for b in PYTHON) == sorted(READERS)
    assert not any(b.not_run for b in PYTHON), "every python snippet runs"


@pytest.mark.slow
@pytest.mark.parametrize("table", public_tables())
@pytest.mark.parametrize("block", PYTHON, ids=lambda b: f"line{b.line}")
def test_python_snippet_reads_every_table_with_a_date_typed_date(block, table, request, monkeypatch, capsys):
    assert "grader_results" in block.body, "a snippet names the table it reads: grader_results"
    root = request.getfixturevalue("regraded_root" if table == "observations" else "demo_root")
    table_dir = root / "demo-output" / table
    assert table_dir.is_dir(), f"the demo output has no {table} table"
    monkeypatch.chdir(root)
    namespace: dict[str, Any] = {}
    exec(compile(block.body.replace("grader_results", table), f"README.md:{block.line}", "exec"), namespace)
    assert capsys.readouterr().out, "the snippet prints its result"
    read_back, date_type = READERS[library(block)]
    rows, undated = partition_rows(table_dir)
    assert rows > 0
    assert read_back(namespace) == (date_type, rows, undated)


def test_the_demo_has_undated_rows_for_the_snippets_to_read(demo_root):
    # The case that broke the README's pyarrow snippet: a table whose every partition is undated.
    rows, undated = partition_rows(demo_root / "demo-output" / "dead_letter")
    assert rows == undated > 0


# ---------------------------------------------------------------------------------------------
# Shell commands


def test_shell_blocks_hold_only_fleetgrade_and_make_commands():
    not_run = [b for b in SHELL if b.not_run]
    assert len(not_run) == NOT_RUN_BLOCKS, [b.line for b in not_run]
    for b in SHELL:
        if not b.not_run:
            for n, command in shell_commands(b):
                assert command.split()[0] in {"fleetgrade", "make", "."}, (
                    f"README.md:{n}: {command!r} runs neither fleetgrade nor make; mark the block {NOT_RUN}")
    assert len(FLEETGRADE_LINES) >= 10
    # One line puts fleetgrade on the PATH, before the first fleetgrade line.
    assert [c for _, c in SOURCED] == [". .venv/bin/activate"]
    assert SOURCED[0][0] < FLEETGRADE_LINES[0][0]


@pytest.fixture(scope="module")
def checkout_copy(demo_root, tmp_path_factory) -> Path:
    """A copy of the demo folder for the commands, which write (report.html, reruns, synth-fleet/)."""
    root = tmp_path_factory.mktemp("readme-cmds")
    shutil.copytree(demo_root / "examples", root / "examples")
    shutil.copytree(demo_root / "demo-output", root / "demo-output")
    (root / ".venv").symlink_to(VENV, target_is_directory=True)
    return root


def as_pasted(command: str, root: Path, path_line: bool = True) -> subprocess.CompletedProcess[str]:
    """``command`` run by bash after the README's PATH line, with no fleetgrade on the PATH before."""
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PATH"] = os.pathsep.join(d for d in env.get("PATH", "").split(os.pathsep)
                                  if d and not (Path(d) / "fleetgrade").exists())
    script = f"{SOURCED[0][1]} && {command}" if path_line else command
    return subprocess.run(["bash", "-c", script], cwd=root, env=env, capture_output=True, text=True, check=False,
                          timeout=300)


def test_the_path_line_puts_the_checkouts_fleetgrade_on_the_path(checkout_copy):
    assert as_pasted("command -v fleetgrade", checkout_copy, path_line=False).returncode != 0
    found = as_pasted("command -v fleetgrade", checkout_copy)
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()).resolve() == (VENV / "bin" / "fleetgrade").resolve()


@pytest.mark.slow
@pytest.mark.parametrize("command", [c for _, c in FLEETGRADE_LINES], ids=[f"line{n}" for n, _ in FLEETGRADE_LINES])
def test_readme_fleetgrade_command_runs(command, checkout_copy):
    r = as_pasted(command, checkout_copy)
    assert r.returncode == expected_status(command), f"{command}\n{r.stderr[-2000:]}"
    assert r.stdout or r.stderr


# ---------------------------------------------------------------------------------------------
# The table reference


def test_the_table_reference_names_every_column_of_every_table():
    from schemas.tables import SPECS

    text = README.read_text(encoding="utf-8")
    reference = text[text.index("\n## Tables\n"):text.index("\n## Reading the tables\n")]
    for table in public_tables():
        heading = re.search(rf"^### `{table}`.*$", reference, re.MULTILINE)
        assert heading, f"README.md has no '### `{table}`' section under Tables"
        section = reference[heading.end():].split("\n### ", 1)[0]
        missing = [f.name for f in SPECS[table].schema if not re.search(rf"(?<![\w-]){f.name}(?![\w-])", section)]
        assert not missing, f"README.md's {table} section does not name {missing}"


# ---------------------------------------------------------------------------------------------
# What a newcomer needs beyond the demo, in few lines


def test_the_readme_stays_short_and_links_the_pages_for_the_real_fleet():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 420, "the README is for users: move detail into docs/ and link it"
    pages = {  # page → what it must say (issue 42: getting runs, Dataflow's prerequisites)
        "docs/getting-runs.md": ["gh extension install github/gh-aw", "gh auth login", "--artifacts all",
                                 "schedule:", "gcloud storage rsync"],
        "docs/dataflow.md": ["gcloud services enable dataflow.googleapis.com", "service-accounts create",
                             "buckets create", "docker push", "--sdk_container_image", "gcloud scheduler jobs create"],
    }
    for page, musts in pages.items():
        assert f"]({page})" in text, f"README.md does not link {page}"
        body = (REPO / page).read_text(encoding="utf-8")
        assert [m for m in musts if m not in body] == [], page
    glossary = text[text.index("\n## Glossary\n"):].split("\n## ", 2)[1]
    for term in ("Cell", "Stray file", "MDE", "FDR", "Change date", "Reference and observed grades"):
        assert re.search(rf"\*\*[^*]*{re.escape(term)}[^*]*\*\*", glossary, re.IGNORECASE), term
