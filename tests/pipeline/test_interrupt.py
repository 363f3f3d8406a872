"""Ctrl-C, through the executable: SIGINT to the job's process group during discovery, grading,
the statistics and the commit (and on the multi-process runner, and in `regrade`) ends the
command with one line, `fleetgrade <command>: interrupted`, and status 130; nothing else reaches
standard error after the log lines written before it (Beam re-raises the interrupt as a
`RuntimeError: KeyboardInterrupt [while running …]` after logging its traceback). The output
stays intact: the lock is released, no staging is left, and a rerun gives a clean run's files."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO
from transforms.output_lock import LOCK_NAME, STAGING
from transforms.progress import INTERVAL_ENV
from transforms.sink import FAULT_ENV, FAULT_SIGNAL_ENV

EXE = Path(sys.executable).parent / "fleetgrade"
TRACE_CONFIG = REPO / "examples" / "trace-grader.config.yaml"
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (INFO|WARNING) [\w.]+: ")
TIMEOUT = 600


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dst = tmp_path_factory.mktemp("interrupt") / "fleet"
    shutil.copytree(REPO / "examples" / "fleet", dst)
    return dst


def _argv(command: str, fleet: Path, out: Path, *flags: str) -> list[str]:
    if command == "regrade":
        return [str(EXE), "regrade", "--input", str(fleet), "--output", str(out),
                "--evidence-at", "2026-12-07T00:00:00Z", *flags]
    return [str(EXE), "run", "--input", str(fleet), "--output", str(out), "--trace-config", str(TRACE_CONFIG), *flags]


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def clean(fleet: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("clean") / "out"
    subprocess.run(_argv("run", fleet, out), check=True, capture_output=True, timeout=TIMEOUT)
    return _files(out)


def _interrupted(argv: list[str], out: Path, when: Callable[[str], bool] | None,
                 env: dict[str, str] | None = None) -> tuple[int, list[str]]:
    """Runs ``argv`` in its own process group; SIGINT to the group once ``when`` holds for a line
    of its standard error, or once the output's lock exists (``when`` "lock"); the status and lines."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, INTERVAL_ENV: "0.5", **(env or {})})
    lines: list[str] = []
    sent = threading.Event()

    def interrupt() -> None:
        if not sent.is_set():
            sent.set()
            os.killpg(proc.pid, signal.SIGINT)

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            if when is not None and when(line):
                interrupt()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if when is None and not env:  # the lock's appearance: the job's pipeline starts with discovery
        deadline = time.monotonic() + TIMEOUT
        while not (out / LOCK_NAME).exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        interrupt()
    code = proc.wait(timeout=TIMEOUT)
    reader.join(timeout=10)
    return code, lines


def _assert_one_line(code: int, lines: list[str], command: str) -> None:
    assert code == 130, lines
    assert lines and lines[-1] == f"fleetgrade {command}: interrupted", lines
    # Before it only the job's log lines: no traceback, no Beam error, no worker's output.
    assert all(LOG_LINE.match(line) for line in lines[:-1]), lines


def _assert_intact(out: Path, fleet: Path, clean: dict[str, bytes]) -> None:
    assert not (out / LOCK_NAME).exists() and not (out / STAGING).exists()
    rerun = subprocess.run(_argv("run", fleet, out), capture_output=True, text=True, timeout=TIMEOUT)
    assert rerun.returncode == 0, rerun.stderr
    assert _files(out) == clean


POINTS: dict[str, tuple[Callable[[str], bool] | None, dict[str, str]]] = {
    "discovery": (None, {}),  # as soon as the job holds the output's lock
    "grading": (lambda line: "fleetgrade: discovered " in line, {}),
    "statistics": (lambda line: "; writing the tables" in line, {}),
    "commit": (None, {FAULT_ENV: "3", FAULT_SIGNAL_ENV: "INT"}),  # after three partition files moved
}


@pytest.mark.slow
@pytest.mark.parametrize("point", list(POINTS))
def test_ctrl_c_is_one_line_and_130_and_the_output_stays_intact(point: str, fleet: Path, clean: dict[str, bytes],
                                                                 tmp_path: Path) -> None:
    when, env = POINTS[point]
    out = tmp_path / "out"
    code, lines = _interrupted(_argv("run", fleet, out), out, when, env)
    _assert_one_line(code, lines, "run")
    _assert_intact(out, fleet, clean)


@pytest.mark.slow
def test_ctrl_c_on_the_multiprocess_runner_silences_its_workers(fleet: Path, clean: dict[str, bytes],
                                                                tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, lines = _interrupted(_argv("run", fleet, out, "--runner", "direct-multiprocess", "--direct-num-workers",
                                     "2"), out, lambda line: "fleetgrade: discovered " in line)
    _assert_one_line(code, lines, "run")
    _assert_intact(out, fleet, clean)


@pytest.mark.slow
def test_ctrl_c_in_regrade(fleet: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, lines = _interrupted(_argv("regrade", fleet, out), out, None)
    _assert_one_line(code, lines, "regrade")
    assert not (out / LOCK_NAME).exists()
    again = subprocess.run(_argv("regrade", fleet, out), capture_output=True, text=True, timeout=TIMEOUT)
    assert again.returncode == 0, again.stderr
