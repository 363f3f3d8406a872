"""Exit statuses, command by command, through the real executable (docs/command-line.md, "Exit
status"): 2 for a usage or input mistake, 1 for a failure while running, 75 for a held lock, 130
for an interrupt; `check` and `trace` add their verdicts (1 regressed; trace-grader's 3). Each
case ends in one line naming the command. Interrupts of `run` and `regrade` at every stage are
tests/pipeline/test_interrupt.py's; the other mistakes of `run` are tests/pipeline/test_cli_mistakes.py's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from graders.tables.parquet import encode_table
from pipeline.cli import main
from tests.conftest import REPO
from tests.helpers.demo import demo_root
from tests.pipeline.test_output_lock_cli import live_lock

__all__ = ["demo_root"]  # the fixture

EXE = Path(sys.executable).parent / "fleetgrade"
FLEET = REPO / "examples" / "fleet"
RUN = FLEET / "ci-doctor" / "run-7100403"
TAMPERED = FLEET / "daily-file-diet" / "run-7100390"
TIMEOUT = 300


def fleetgrade(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(EXE), *argv], cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT, check=False)


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("codes")
    (base / "empty").mkdir()
    tables = base / "tables"
    part = tables / "runs" / "workflow=ci-doctor" / "date=2026-11-28"
    part.mkdir(parents=True)
    (part / "part-00000.parquet").write_bytes(encode_table("runs", [{"run_id": "1", "attempt": 1}], "ci-doctor"))
    (base / "bad.json").write_text("{nope")
    (base / "flaky.json").write_text(json.dumps({"runs": [
        {"task": "t", "run_id": "1", "ok": 0, "steps": [{"step": 1, "tool": "Read"}]}]}))
    return {"base": base, "empty": base / "empty", "tables": tables, "bad": base / "bad.json",
            "flaky": base / "flaky.json"}


Case = tuple[str, Callable[[dict[str, Path]], list[str]], int, str]
CASES: list[Case] = [
    ("run-input-mistake", lambda p: ["run", "--input", str(p["empty"] / "x"), "--output", str(p["base"] / "o")], 2,
     "run: --input does not exist"),
    ("run-lock-held", lambda p: ["run", "--input", str(FLEET), "--output", str(p["base"] / "locked")], 75,
     "run: output is locked by run job holder"),
    ("regrade-usage", lambda p: ["regrade", str(RUN), "--evidence-at", "yesterday"], 2, "regrade: "),
    ("regrade-input-mistake", lambda p: ["regrade", str(TAMPERED), "--evidence-at", "2026-12-07T00:00:00Z"], 2,
     "regrade: run 7100390 ("),
    ("grade-usage", lambda p: ["grade", str(RUN), "--nope"], 2, "grade: unknown flag --nope"),
    ("grade-input-mistake", lambda p: ["grade", "--trace", str(p["bad"])], 2, "grade: not valid JSON: "),
    ("preprocess-input-mistake", lambda p: ["preprocess", str(p["empty"] / "x")], 2, "preprocess: not a directory"),
    ("sql-input-mistake", lambda p: ["sql", str(p["empty"]), "SELECT 1"], 2, "sql: no fleetgrade tables found"),
    ("sql-query-mistake", lambda p: ["sql", str(p["tables"]), "SELECT nope FROM runs"], 2, "sql: Binder Error"),
    ("report-input-mistake", lambda p: ["report", str(p["empty"] / "x")], 2, "report: not a folder"),
    ("report-unknown-workflow", lambda p: ["report", str(p["tables"]), "--workflow", "ci-docter"], 2,
     "report: --workflow 'ci-docter' has no rows in this output; did you mean ci-doctor?"),
    ("bigquery-ddl-usage", lambda p: ["bigquery-ddl", "gs://b/out", "--dataset", "no spaces"], 2,
     "bigquery-ddl: invalid dataset name"),
    ("synth-usage", lambda p: ["synth", "--runs", "many", "--out", str(p["base"] / "s")], 2, ""),
    ("check-input-mistake", lambda p: ["check", str(p["empty"] / "x")], 2, "check: no such output folder"),
    # trace keeps trace-grader's statuses (conformance pins them): 2 usage, 1 unreadable input, 3 gate.
    ("trace-usage", lambda p: ["trace"], 2, ""),
    ("trace-unreadable-input", lambda p: ["trace", "--traces", str(p["bad"])], 1, "trace: error: "),
    ("trace-gate", lambda p: ["trace", "--traces", str(p["flaky"])], 3, ""),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_each_command_exits_with_its_status_in_one_line(case: Case, places: dict[str, Path]) -> None:
    name, argv, code, text = case
    if name == "run-lock-held":
        live_lock(places["base"] / "locked")
    proc = fleetgrade(*argv(places))
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    if text:
        ours = [line for line in proc.stderr.splitlines() if line.startswith("fleetgrade ")]
        assert len(ours) == 1 and ours[0].startswith(f"fleetgrade {text}"), proc.stderr


def test_a_failure_while_running_is_1_and_one_line(places: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The machine failing under a command (here a full disk as the report is written) is not the
    user's mistake: status 1, one line naming the file."""
    def full(*_: object, **__: object) -> None:
        raise OSError(28, "No space left on device", str(places["tables"] / "report.html"))

    monkeypatch.setattr(Path, "write_text", full)
    assert main(["report", str(places["tables"])]) == 1
    assert capsys.readouterr().err == (f"fleetgrade report: No space left on device "
                                       f"({places['tables'] / 'report.html'})\n")


def test_ctrl_c_of_any_command_is_130(places: dict[str, Path]) -> None:
    """A long query interrupted: one line and 130, as for `run` (test_interrupt.py)."""
    proc = subprocess.Popen([str(EXE), "sql", str(places["tables"]),
                             "SELECT count(*) FROM range(100000000000) a, range(10) b"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    time.sleep(3)  # the query runs (start-up takes about a second)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (130, "fleetgrade sql: interrupted\n"), (out, err)


def _loaded(pid: int, library: str) -> bool:
    """The process has mapped ``library`` (it got as far as importing it)."""
    try:
        return library in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.parametrize("after", [0.0, 1.0, 2.5], ids=["queries-start", "queries", "later"])
def test_ctrl_c_during_report_is_one_line_and_130(demo_root: Path, tmp_path: Path, after: float) -> None:
    """Issue 42: SIGINT to the process group at several points of `report` over the demo, counted
    from when it loads DuckDB (its handler is installed by then; the interpreter's own start-up is
    Python's): one line and 130, or, finished first, the page whole; never a traceback, never a
    half-written page beside it."""
    target = tmp_path / "report.html"
    proc = subprocess.Popen([str(EXE), "report", str(demo_root / "demo-output"), "--html", str(target)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + TIMEOUT
    while not _loaded(proc.pid, "_duckdb") and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(after)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=TIMEOUT)
    if after == 0.0 or proc.returncode != 0:  # the first point always comes before the page is written
        assert (proc.returncode, err) == (130, "fleetgrade report: interrupted\n"), (out, err)
        assert out == "" and list(tmp_path.iterdir()) == []
    else:
        assert err == "" and out == f"{target}\n"
        assert target.read_text(encoding="utf-8").rstrip().endswith("</html>")
        assert list(tmp_path.iterdir()) == [target]
