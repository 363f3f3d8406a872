"""`fleetgrade run` on runs whose numbers, nesting, identities, dates and encodings are hostile
(issue 40, the input side): every run is exactly one of graded or dead-lettered, each dead
letter names the file, the field and the value in plain words, and the counts agree."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.tables import connect
from tests.conftest import REPO
from tests.helpers.hostile_numbers import (
    DEAD,
    GRADED,
    INLINE_WORKFLOW,
    SESSION_WARNED,
    WARNED,
    inline_graders,
    make_number_fleet,
)

FLEETGRADE = str(Path(sys.executable).parent / "fleetgrade")
SUMMARY = re.compile(r"(\d+) run\(s\) discovered: (\d+) graded, (\d+) dead-lettered, (\d+) unchanged")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FLEETGRADE_SHARED": os.environ.get("FLEETGRADE_SHARED", "/work/shared")}
    return subprocess.run([FLEETGRADE, *args], capture_output=True, text=True, timeout=600, cwd=REPO, env=env)


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Path, subprocess.CompletedProcess[str]]]:
    root = tmp_path_factory.mktemp("numbers")
    fleet = make_number_fleet(root)
    graders = inline_graders(root / "graders")
    out = root / "out"
    done = _run("run", "--input", str(fleet), "--output", str(out), "--graders-dir", str(graders))
    yield fleet, graders, out, done


def _rel(fleet: Path, path: str) -> str:
    return path[len(str(fleet)) + 1:]


@pytest.mark.slow
def test_every_run_is_graded_or_a_dead_letter_saying_why_and_the_counts_agree(graded):
    fleet, _, out, done = graded
    assert done.returncode == 0, done.stderr[-3000:]
    con = connect(str(out))
    runs = {_rel(fleet, r[0]): r[1] for r in con.execute("SELECT root, warnings FROM runs").fetchall()}
    dead = {_rel(fleet, r[0]): r[1] for r in con.execute("SELECT input, message FROM dead_letter").fetchall()}
    assert set(runs) == {*GRADED, *WARNED} and set(dead) == set(DEAD)
    for rel, words in DEAD.items():
        assert dead[rel].startswith(f"{fleet}/{rel.split('/')[0]}") and words in dead[rel], (rel, dead[rel])
    for rel in GRADED:
        assert runs[rel] == [] or rel == SESSION_WARNED[0], (rel, runs[rel])
    for rel, words in WARNED.items():
        assert any(w.startswith(words) for w in runs[rel]), (rel, runs[rel])
    assert any(SESSION_WARNED[1] in w for w in runs[SESSION_WARNED[0]])
    # Exactly one of graded or dead-lettered: no grader row of a dead-lettered run.
    dead_workflows = {rel.split("/")[0] for rel in DEAD if not rel.startswith("sessions/")}
    rows = {r[0] for r in con.execute("SELECT DISTINCT workflow FROM grader_results").fetchall()}
    assert not rows & dead_workflows
    # The summary says what the tables hold.
    found = SUMMARY.search(done.stderr)
    assert found is not None, done.stderr[-2000:]
    discovered, n_graded, n_dead, unchanged = map(int, found.groups())
    assert (discovered, n_graded, n_dead, unchanged) == (len(runs) + len(dead), len(runs), len(dead), 0)


@pytest.mark.slow
def test_numbers_reach_the_graders_as_javascript_reads_them(graded):
    _, _, out, _ = graded
    con = connect(str(out))
    # An inline grader walks a trace 1,000 levels deep (it was a RecursionError).
    value, status = con.execute("SELECT value, status FROM grader_results WHERE workflow = ? AND grader_id = "
                                "'trace-size'", [INLINE_WORKFLOW]).fetchone()
    assert status == "pass" and value > 2000
    # A 5,000-digit issue number is the task's, as text (int() of it raised, after the rows were made).
    (task,) = con.execute("SELECT task FROM trace_verdicts WHERE workflow = 'n-issue'").fetchone()
    assert task == "n-issue#" + "7" * 5000
    # Token counts past the doubles are Infinity, which the float column stores as null.
    totals = con.execute("SELECT total_input_tokens, total_output_tokens FROM runs WHERE workflow = 'n-tokens'").fetchone()
    assert totals == (None, None)
    assert con.execute("SELECT run_id FROM runs WHERE workflow = 'n-exact'").fetchone() == (str(2**53),)


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def rerun(graded) -> tuple[dict[str, bytes], dict[str, bytes], subprocess.CompletedProcess[str]]:
    fleet, graders, out, _ = graded
    before = _files(out)
    done = _run("run", "--input", str(fleet), "--output", str(out), "--graders-dir", str(graders))
    assert done.returncode == 0, done.stderr[-2000:]
    return before, _files(out), done


@pytest.mark.slow
def test_an_unchanged_rerun_changes_no_run_folders_file(rerun):
    before, after, _ = rerun
    outside_sessions = [k for k in {*before, *after} if "workflow=sessions/" not in k]
    assert [k for k in outside_sessions if before.get(k) != after.get(k)] == []


@pytest.mark.slow
def test_an_unchanged_rerun_changes_nothing(rerun):
    before, after, done = rerun
    assert after == before
    found = SUMMARY.search(done.stderr)
    assert found is not None and int(found.group(2)) == 0
