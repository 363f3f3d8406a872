"""`fleetgrade run` and `grade` on a fleet of hostile runs (issues 28 and 40, every case together):
the job finishes, good runs are graded, each hostile run is a warned run or a dead letter saying
why, nothing from outside the fleet reaches the output, nothing from inside it reaches the
terminal raw, every count printed agrees with the tables, and an unchanged rerun changes no file."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.tables import connect
from tests.conftest import REPO
from tests.helpers import hostile_numbers as numbers
from tests.helpers.hostile_fleet import (
    BIDI_WORKFLOW,
    CJK_WORKFLOW,
    DEAD,
    DEAD_40,
    ESC,
    FORGED,
    GOOD,
    GRADED,
    GRADED_40,
    NULL_WORKFLOW,
    SECRET,
    WARNED,
    WARNED_40,
    make_hostile_fleet,
    remove_nest,
)

ALL_DEAD = {**DEAD, **DEAD_40, **numbers.DEAD}
ALL_WARNED = {**WARNED, **WARNED_40, **numbers.WARNED}
ALL_GRADED = (*GRADED, *GRADED_40, *numbers.GRADED)
SUMMARY = re.compile(r"(\d+) run\(s\) discovered: (\d+) graded, (\d+) dead-lettered, (\d+) unchanged, (\d+) outside")
RAW = tuple(chr(c) for c in (*range(0x20), 0x7F, 0x9B, 0x202E) if c != 0x0A)  # a line's own newline aside

FLEETGRADE = str(Path(sys.executable).parent / "fleetgrade")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FLEETGRADE_SHARED": os.environ.get("FLEETGRADE_SHARED", "/work/shared")}
    return subprocess.run([FLEETGRADE, *args], capture_output=True, text=True, timeout=300, cwd=REPO, env=env)


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, subprocess.CompletedProcess[str]]]:
    root = tmp_path_factory.mktemp("hostile")
    fleet = make_hostile_fleet(root)
    numbers.make_number_fleet(root)  # issue 40's input side, in the same fleet
    out = root / "out"
    done = _run("run", "--input", str(fleet), "--output", str(out), "--log-level", "INFO")
    yield fleet, out, done
    remove_nest(fleet / "wf-deep/run-1")


def _file_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_job_finishes_and_every_run_is_graded_or_a_dead_letter(graded):
    fleet, out, done = graded
    assert done.returncode == 0, done.stderr[-2000:]
    con = connect(str(out))
    roots = {r[0][len(str(fleet)) + 1:] for r in con.execute("SELECT root FROM runs").fetchall()}
    dead = {r[0][len(str(fleet)) + 1:]: r[1] for r in con.execute("SELECT input, message FROM dead_letter").fetchall()}
    assert roots == {*GOOD, *ALL_GRADED, *ALL_WARNED}
    assert set(dead) == set(ALL_DEAD)
    for folder, words in ALL_DEAD.items():
        assert words in dead[folder], (folder, dead[folder])
    # Each dead letter names the file or folder it is about.
    for folder, message in dead.items():
        assert message.startswith(str(fleet / folder)), message


def test_hostile_data_is_a_warning_of_its_run(graded):
    fleet, out, _ = graded
    con = connect(str(out))
    warnings = {r[0][len(str(fleet)) + 1:]: r[1] for r in con.execute("SELECT root, warnings FROM runs").fetchall()}
    for folder, words in ALL_WARNED.items():
        assert any(w.startswith(words) for w in warnings[folder]), (folder, warnings[folder])
    session, words = numbers.SESSION_WARNED
    assert any(words in w for w in warnings[session]), warnings[session]
    for folder in (*GOOD, *ALL_GRADED):
        assert warnings[folder] == [] or folder == session, folder
    # Good runs are graded as usual, beside the hostile ones.
    statuses = con.execute("SELECT count(*), count(DISTINCT run_id) FROM grader_results WHERE workflow = 'good'").fetchone()
    assert statuses[0] > 0 and statuses[1] == 2


def test_a_value_at_the_edge_of_its_type_stays_out_of_the_statistics_alone(graded):
    """The statistics and state stages take a run's values through the per-run boundary: the
    run is warned and left out, its workflow's other run keeps its statistics, every graded
    (workflow, date) has its grader_stats, and the job (and its rerun, below) succeeds."""
    _, out, _ = graded
    con = connect(str(out))
    stats = con.execute("SELECT n, n_unavailable, mean FROM grader_stats WHERE workflow = 'wf-huge' AND "
                        "grader_id = 'execution-duration' ORDER BY window_days").fetchall()
    assert stats and all(row == (1, 1, 1000.0) for row in stats), stats
    graded_parts = set(con.execute("SELECT DISTINCT workflow, date FROM grader_results").fetchall())
    assert set(con.execute("SELECT DISTINCT workflow, date FROM grader_stats").fetchall()) == graded_parts


def test_names_read_back_as_written(graded):
    _, out, _ = graded
    con = connect(str(out))
    names = {r[0] for r in con.execute("SELECT DISTINCT workflow FROM grader_results").fetchall()}
    assert {CJK_WORKFLOW, NULL_WORKFLOW, "good"} <= names and None not in names
    assert con.execute("SELECT count(*) FROM runs WHERE workflow = ?", [CJK_WORKFLOW]).fetchone()[0] == 1
    for folder in (out / "runs").iterdir():
        assert len(folder.name.encode()) <= 255
    # Dead letters whose date folder is no date have none: never an invalid date= partition.
    assert not [p for p in out.rglob("date=*") if p.name not in ("date=2026-05-01", "date=__HIVE_DEFAULT_PARTITION__")]


def test_nothing_from_the_fleet_reaches_the_terminal_raw(graded):
    """Control characters in file and folder names, session ids, tool names and a bidi override
    in a workflow name: every log line shows them as \\xNN, no line is forged; the tables keep them."""
    _, out, done = graded
    raw = [line for line in done.stderr.splitlines() if any(c in line for c in RAW)]
    assert raw == [], raw[:3]
    assert not [line for line in done.stderr.splitlines() if line.startswith("2026-01-01")]
    assert "notes\\x1b]0;pwned\\x07\\x1b[2J.txt" in done.stderr and "x\\x0a2026-01-01" in done.stderr
    con = connect(str(out))
    assert con.execute("SELECT count(*) FROM runs WHERE workflow = ?", [BIDI_WORKFLOW]).fetchone()[0] == 1
    assert con.execute("SELECT count(*) FROM dead_letter WHERE contains(input, chr(27))").fetchone()[0] == 1
    assert con.execute("SELECT count(*) FROM dead_letter WHERE contains(message, chr(10))").fetchone()[0] == 1


def _raw_lines(text: str) -> list[str]:
    """Lines holding a control character from the fleet, or forged by a newline in a name."""
    return [line for line in text.splitlines() if any(c in line for c in RAW) or line.startswith(FORGED[:10])]


def test_no_command_shows_the_fleet_raw(graded, tmp_path):
    """Every command that prints what the fleet or its output holds (the tables in each format,
    the gate, the report, single-run grading, trace, regrade) escapes it, and none ends in a
    traceback: the hostile runs are the same for each."""
    fleet, out, _ = graded
    query = "SELECT input, message FROM dead_letter UNION ALL SELECT root, workflow FROM runs ORDER BY 1"
    shown = {
        "sql": _run("sql", str(out), query),
        "sql json": _run("sql", str(out), query, "--format", "json"),
        "check": _run("check", str(out), "--allow-untested"),
        "check json": _run("check", str(out), "--allow-untested", "--json"),
        "report": _run("report", str(out), "--html", str(tmp_path / "report.html")),
        "grade": _run("grade", str(fleet / "wf-esc/run-60"), "--out", str(tmp_path / "one")),
        "trace": _run("trace", "--input", str(fleet / "wf-sess/esc.jsonl")),
        "regrade": _run("regrade", "--evidence-at", "2026-06-01T00:00:00Z", "--input", str(fleet), "--output",
                        str(tmp_path / "regraded"), "--log-level", "INFO"),
    }
    for name, done in shown.items():
        text = done.stdout + done.stderr
        assert "Traceback" not in text, (name, text[-3000:])
        assert _raw_lines(text) == [], (name, _raw_lines(text)[:3])
    assert shown["regrade"].returncode == 0 and shown["check"].returncode == 0
    assert "notes\\e]0;pwned" in shown["sql"].stdout and "x\\n2026-01-01" in shown["sql"].stdout  # DuckDB's box
    rows = json.loads(shown["sql json"].stdout)  # JSON escapes them; the values read back as stored
    assert BIDI_WORKFLOW in {r["message"] for r in rows}
    assert any(f"notes{ESC}.txt" in r["message"] for r in rows)
    assert "abc\\u202edef" in shown["check"].stdout
    assert BIDI_WORKFLOW in {r["workflow"] for r in json.loads(shown["check json"].stdout)["rows"]}
    assert "\\x1b]0;pwned" in shown["grade"].stderr and "\\x1b]0;pwned" in shown["trace"].stdout


def test_a_run_is_graded_or_dead_lettered_and_the_counts_agree_with_the_tables(graded):
    """Inputs counted = runs rows + dead letters; none is both; the summary says what the tables hold."""
    _, out, done = graded
    con = connect(str(out))
    runs = {r[0] for r in con.execute("SELECT root FROM runs").fetchall()}
    dead = {r[0] for r in con.execute("SELECT input FROM dead_letter").fetchall()}
    assert not runs & dead
    found = SUMMARY.search(done.stderr)
    assert found is not None, done.stderr[-2000:]
    discovered, graded_n, dead_n, unchanged, outside = map(int, found.groups())
    assert (discovered, graded_n, dead_n, unchanged, outside) == (len(runs) + len(dead), len(runs), len(dead), 0, 0)
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == len(runs)  # one row per input


def test_no_content_from_outside_the_fleet_reaches_the_output(graded):
    _, out, _ = graded
    assert not [rel for rel, data in _file_bytes(out).items() if SECRET.encode() in data]


def test_an_unchanged_rerun_changes_nothing(graded):
    """Incremental reading decodes the hashed partitions: nothing is regraded or duplicated."""
    fleet, out, first = graded
    before = _file_bytes(out)
    done = _run("run", "--input", str(fleet), "--output", str(out), "--log-level", "INFO")
    assert done.returncode == 0, done.stderr[-2000:]
    assert _raw_lines(done.stderr) == []
    assert _file_bytes(out) == before
    # Counted as the first job counted them: the identity stage's dead letters decided again, the rest unchanged.
    found, was = SUMMARY.search(done.stderr), SUMMARY.search(first.stderr)
    assert found is not None and was is not None
    redecided = connect(str(out)).execute("SELECT count(*) FROM dead_letter WHERE stage = 'duplicate'").fetchone()[0]
    assert tuple(map(int, found.groups())) == (int(was[1]), 0, redecided, int(was[1]) - redecided, 0)


def test_single_run_grade_refuses_a_link_out_of_the_run(graded, tmp_path, capsys):
    from pipeline.cli import main

    fleet, _, _ = graded
    run = fleet / "wf-link" / "run-13"
    info = json.loads((run / "aw_info.json").read_text())
    (run / "aw_info.json").write_text(json.dumps({**info, "workflow_name": "wf-link"}))
    assert main(["grade", str(run), "--out", str(tmp_path / "o")]) == 0
    assert not [rel for rel, data in _file_bytes(tmp_path / "o").items() if SECRET.encode() in data]
    captured = capsys.readouterr()
    assert SECRET not in captured.out + captured.err


def _on_a_terminal(*args: str) -> str:
    """What ``fleetgrade args`` prints to stdout when stdout is a terminal (a pseudo-terminal)."""
    import pty

    primary, secondary = pty.openpty()
    try:
        done = subprocess.run([FLEETGRADE, *args], stdout=secondary, stderr=subprocess.PIPE, timeout=300, cwd=REPO)
    finally:
        os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # EIO: the terminal's other side is closed and drained
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    assert done.returncode in (0, 1), done.stderr
    return b"".join(chunks).decode()


def test_json_on_a_terminal_is_escaped_and_the_same_values(tmp_path):
    """trace --json and preprocess print JSON that JSON itself leaves raw (a bidi override, C1):
    on a terminal as \\uNNNN escapes (the same values once parsed), into a pipe as the reference
    prints it."""
    bidi = "s\u202eevil\u009b2J"
    log = tmp_path / "wf" / "bidi.jsonl"
    log.parent.mkdir()
    log.write_text("".join(json.dumps({"ts": "2026-05-01T10:00:00Z", "session_id": bidi, "hook": hook,
                                       "tool": f"Read{bidi}", "command": "ls", "exit_code": code}) + "\n"
                           for hook, code in (("PreToolUse", ""), ("PostToolUse", 0))))
    shown = _on_a_terminal("trace", "--input", str(log), "--json")
    piped = _run("trace", "--input", str(log), "--json").stdout
    assert "\u202e" in piped and "\\u202e" in shown
    assert not [c for c in ("\u202e", "\u009b") if c in shown]
    assert json.loads(shown) == json.loads(piped)
