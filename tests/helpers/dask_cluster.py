"""A real Dask cluster for tests: ``dask scheduler`` and ``dask worker`` processes, every
listener on 127.0.0.1, torn down whatever happens.

- The scheduler, the nannies, the workers and their HTTP servers are bound to 127.0.0.1
  (``--dashboard-address 127.0.0.1:0``: ``--no-dashboard`` alone leaves a worker's HTTP server
  on every interface); tests check it with tests/helpers/listeners.py.
- Each command starts in its own session and is ended as a process group (SIGTERM, then
  SIGKILL); the scheduler dies with the test process (``PR_SET_PDEATHSIG``) and the workers
  within ``--death-timeout`` of losing it, so a killed pytest leaves nothing behind.
- Workers run with the repository on ``PYTHONPATH``: they import the tests' DoFns by reference.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import REPO
from tests.helpers.listeners import tree

START_TIMEOUT = 180  # seconds: a loaded 2-core machine imports Beam in every worker


@dataclass
class Cluster:
    address: str
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def pids(self) -> set[int]:
        """Every process of the cluster: the commands and what they started (nannies' workers)."""
        return {pid for proc in self.procs for pid in tree(proc.pid)}


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def worker_env() -> dict[str, str]:
    python_path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=python_path, DASK_LOGGING__DISTRIBUTED="warning",
                PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    dask = str(Path(sys.executable).parent / "dask")
    with log.open("ab") as out:
        return subprocess.Popen([dask, *args], cwd=REPO, env=worker_env(), stdout=out, stderr=out,
                                start_new_session=True, preexec_fn=_die_with_parent)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
            # The group may outlive its leader for a moment (a nanny's worker): wait for it too.
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and _group_alive(proc.pid):
                time.sleep(0.1)
            if not _group_alive(proc.pid):
                break
        except subprocess.TimeoutExpired:
            continue


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@contextmanager
def dask_cluster(folder: Path, workers: int = 2) -> Iterator[Cluster]:
    """``dask scheduler`` and ``workers`` × ``dask worker`` (one process, one thread each)."""
    folder.mkdir(parents=True, exist_ok=True)
    scheduler_file = folder / "scheduler.json"
    loopback = ["--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0"]
    cluster = Cluster("")
    try:
        cluster.procs.append(_start(["scheduler", "--port", "0", *loopback,
                                     "--scheduler-file", str(scheduler_file)], folder / "scheduler.log"))
        deadline = time.monotonic() + START_TIMEOUT
        while not scheduler_file.exists():
            if cluster.procs[0].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dask scheduler did not start: {(folder / 'scheduler.log').read_text()[-2000:]}")
            time.sleep(0.1)
        time.sleep(0.2)  # the file is written whole, but let it be closed
        cluster.address = json.loads(scheduler_file.read_text())["address"]
        for i in range(workers):
            cluster.procs.append(_start(
                ["worker", cluster.address, *loopback, "--nworkers", "1", "--nthreads", "1",
                 "--death-timeout", "30", "--name", f"w{i}"], folder / f"worker{i}.log"))
        _wait_for_workers(cluster.address, workers, deadline - time.monotonic())
        yield cluster
    finally:
        for proc in reversed(cluster.procs):
            _stop(proc)


def _wait_for_workers(address: str, n: int, timeout: float) -> None:
    from dask.distributed import Client

    with Client(address, timeout=timeout) as client:
        client.wait_for_workers(n, timeout=timeout)
