"""One writer per output and staging cleanup, through the ``fleetgrade`` executable (issue 28, Operations).

- a second writer (run or regrade) is refused with one line and exit 75, touching nothing;
- a lock whose owner is dead or expired is taken over;
- the staging of a dead job is removed by the next run, a live job's is kept;
- two runs started together: never a crash, the output ends as one clean run;
- a full disk (ENOSPC) leaves the previous output, no staging and no lock, and the next run works;
- a job whose lock was taken over before its commit commits nothing.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.cli import main
from tests.conftest import REPO
from transforms import sink
from transforms.output_lock import LOCK_NAME, LOCKED_EXIT, STAGING, LocalStore, Owner, staging_owner

FLEET = REPO / "examples" / "fleet"
FLEETGRADE = str(Path(sys.executable).parent / "fleetgrade")
LOCKED_LINE = re.compile(r"fleetgrade (run|regrade): output is locked by run job holder \(pid \d+ on \S+\) "
                         r"since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \((.+)\)")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    """A few runs of the sample fleet: each test runs the pipeline several times."""
    root = tmp_path_factory.mktemp("fleet")
    for workflow in ("ci-doctor", "daily-file-diet"):
        for run in sorted((FLEET / workflow).glob("run-7*"))[:3]:
            shutil.copytree(run, root / workflow / run.name)
    return root


def snapshot(root: Path) -> dict[str, tuple[str, int]]:
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def contents(root: Path) -> dict[str, str]:
    return {k: v[0] for k, v in snapshot(root).items()}


def fleetgrade(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FLEETGRADE, *args, "--log-level", "WARNING"], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, **(env or {})))


def run_args(fleet: Path, out: Path | str, *flags: str) -> list[str]:
    return ["run", "--input", str(fleet), "--output", str(out), *flags]


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def live_lock(out: Path) -> None:
    """A lock held by a live process (this test's) with a future expiry, as a running job holds it."""
    out.mkdir(parents=True, exist_ok=True)
    (out / LOCK_NAME).write_bytes(Owner.current("holder", "run", time.time(), 3600).encode())


@pytest.fixture(scope="module")
def graded(fleet, tmp_path_factory) -> Path:
    """The fleet graded once, cleanly: what every test's output must equal in the end."""
    out = tmp_path_factory.mktemp("graded") / "out"
    assert main([*run_args(fleet, out), "--log-level", "WARNING"]) == 0
    assert not (out / LOCK_NAME).exists() and not (out / STAGING).exists()
    return out


@pytest.fixture
def out(graded, tmp_path) -> Path:
    copy = tmp_path / "out"
    shutil.copytree(graded, copy)
    return copy


@pytest.mark.parametrize("command", ["run", "regrade"])
def test_a_second_writer_is_refused_in_one_line_and_touches_nothing(fleet, out, command):
    live_lock(out)
    before = snapshot(out)
    if command == "run":
        proc = fleetgrade(*run_args(fleet, out, "--full"))
    else:
        proc = fleetgrade("regrade", "--input", str(fleet), "--output", str(out),
                          "--evidence-at", "2026-12-01T00:00:00Z")
    assert proc.returncode == LOCKED_EXIT
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    m = LOCKED_LINE.fullmatch(lines[0])
    assert m and m.group(1) == command and m.group(2) == f"{out}/{LOCK_NAME}", lines[0]
    assert snapshot(out) == before, "nothing of the output is touched, the lock included"


@pytest.mark.parametrize("stale", ["dead pid", "expired"])
def test_a_stale_lock_is_taken_over(fleet, out, graded, stale):
    owner = Owner.current("crashed", "run", time.time(), 3600)
    if stale == "dead pid":  # the job was killed: its lock stayed
        owner = dataclasses.replace(owner, pid=dead_pid())
    else:  # a live process whose heartbeat stopped long ago
        owner = dataclasses.replace(owner, started=owner.started - 7200, expires=owner.started - 3600)
    (out / LOCK_NAME).write_bytes(owner.encode())
    proc = fleetgrade(*run_args(fleet, out))
    assert proc.returncode == 0, proc.stderr
    assert "took over the lock of" in proc.stderr and "run job crashed" in proc.stderr
    assert contents(out) == contents(graded), "the lock is released and the output is a clean run's"


def test_the_staging_of_a_dead_job_is_removed_and_a_live_jobs_kept(fleet, out, graded):
    store = LocalStore(str(out))
    dead = dataclasses.replace(Owner.current("dead-job", "run", time.time(), 3600), pid=dead_pid())
    live = Owner.current("live-job", "run", time.time(), 3600)  # this test's process: alive
    for owner in (dead, live):
        store.put(staging_owner(owner.job), owner.encode())
        store.put(f"{STAGING}/{owner.job}/_shards/runs-0123", b"staged rows")
    kept = snapshot(out / STAGING / "live-job")
    proc = fleetgrade(*run_args(fleet, out))  # unchanged: grades nothing, still cleans up
    assert proc.returncode == 0, proc.stderr
    assert "removed the staging of 1 job(s) that ended without cleaning up: dead-job" in proc.stderr
    assert os.listdir(out / STAGING) == ["live-job"]
    assert snapshot(out / STAGING / "live-job") == kept
    shutil.rmtree(out / STAGING)
    assert contents(out) == contents(graded)


def test_two_runs_started_together_never_crash(fleet, graded, tmp_path):
    """Before the lock, one commit deleted the other's staging: FileNotFoundError, partial commits."""
    out = tmp_path / "out"
    procs = [subprocess.Popen([FLEETGRADE, *run_args(fleet, out), "--log-level", "WARNING"], text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    results = [(p.wait(timeout=300), p.communicate()[1]) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes in ([0, 0], [0, LOCKED_EXIT]), results  # one after the other, or one refused
    for code, err in results:
        if code == LOCKED_EXIT:
            assert len(err.splitlines()) == 1 and "output is locked by run job" in err
    assert contents(out) == contents(graded)


@pytest.fixture
def no_space_at_write(monkeypatch) -> Iterator[None]:
    """Every partition write fails as a full disk does, after the job has staged its rows."""

    def full(*_: object) -> bytes:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sink, "encode_table", full)
    yield


def test_a_full_disk_leaves_the_old_output_no_staging_and_no_lock(fleet, out, graded, no_space_at_write,
                                                                  capsys, monkeypatch):
    before = snapshot(out)
    assert main([*run_args(fleet, out, "--full"), "--log-level", "ERROR"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == (f"fleetgrade run: no space left on device while writing the output; this job's staging "
                       f"was removed and the previous output stays readable ({out})")
    assert snapshot(out) == before
    monkeypatch.undo()  # space again
    assert main([*run_args(fleet, out, "--full"), "--log-level", "ERROR"]) == 0
    assert contents(out) == contents(graded)


@pytest.fixture
def tiny_disk(tmp_path) -> Iterator[Path]:
    """A 4 MiB tmpfs (root only: skipped where mounting is not allowed)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_really_full_disk_through_the_executable(fleet, graded, tiny_disk):
    out = tiny_disk / "out"
    shutil.copytree(graded, out)
    free = shutil.disk_usage(tiny_disk).free
    (tiny_disk / "ballast").write_bytes(b"\0" * (free - 24 * 1024))  # 24 KiB left: rows cannot be staged
    before = snapshot(out)
    proc = fleetgrade(*run_args(fleet, out, "--full"))
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == (
        f"fleetgrade run: no space left on device while writing the output; this job's staging was removed "
        f"and the previous output stays readable ({out})")
    assert snapshot(out) == before, "old output intact, no staging, no lock"
    # The disk is still full: an unchanged run (the issue: it failed on the leftover staging) works.
    proc = fleetgrade(*run_args(fleet, out))
    assert proc.returncode == 0, proc.stderr
    assert contents(out) == contents(graded)


def test_a_job_whose_lock_was_taken_over_commits_nothing(fleet, out, capsys, monkeypatch):
    """Its heartbeat stalled past the expiry and another job took the lock: the commit refuses."""
    before = snapshot(out)
    encode = sink.encode_table

    intruder = Owner.current("intruder", "run", time.time(), 3600).encode()

    def taken_over(*args: object) -> bytes:  # while the job writes its partitions
        (out / LOCK_NAME).write_bytes(intruder)
        return encode(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(sink, "encode_table", taken_over)
    assert main([*run_args(fleet, out, "--full"), "--log-level", "ERROR"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert re.fullmatch(r"fleetgrade run: this job's lock on the output was taken over by run job intruder "
                        rf"\(pid {os.getpid()} on \S+\) before its commit; nothing was committed "
                        rf"\({re.escape(str(out))}/{LOCK_NAME}\)", err[-1]), err
    intruders = Owner.decode((out / LOCK_NAME).read_bytes())
    assert intruders.job == "intruder", "the other job's lock is left alone"
    (out / LOCK_NAME).unlink()
    assert snapshot(out) == before, "nothing committed, this job's staging removed"
