"""The same fleet through every local runner path gives byte-identical tables.

- in-process FnApiRunner (the default `direct`);
- DirectRunner multi-processing (`direct-multiprocess`, 2 workers);
- the portable runner path that Flink/Spark clusters use: Beam's local job service plus an
  external worker pool (no Java, no download).

Beam's own gRPC servers (the multi-process runner's, the job service's and the worker pool's)
listen on loopback only while the jobs run (pipeline/runners/loopback.py; ``ss -ltnp``).
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.helpers.listeners import off_loopback, watching

FLEET = REPO / "examples" / "fleet"
TIMEOUT = 300  # generous: a shared 2-core machine; a hung portable job must not hang the suite


def digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def run_cli(output: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pipeline.cli", "run", "--input", str(FLEET), "--output", str(output),
           "--log-level", "WARNING", *flags]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT, check=False)


def run_cli_watched(output: Path, *flags: str, also: tuple[int, ...] = ()) -> subprocess.CompletedProcess[str]:
    """:func:`run_cli`, failing if it (or the ``also`` processes) listened beyond loopback."""
    cmd = [sys.executable, "-m", "pipeline.cli", "run", "--input", str(FLEET), "--output", str(output),
           "--log-level", "WARNING", *flags]
    with subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        with watching(lambda: {proc.pid, *also}) as seen:
            out, err = proc.communicate(timeout=TIMEOUT)
    assert seen and off_loopback(sorted(seen)) == [], sorted(seen)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("inprocess") / "out"
    proc = run_cli(out)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return digests(out)


def test_multiprocess_direct_runner(reference, tmp_path):
    proc = run_cli_watched(tmp_path / "out", "--runner", "direct-multiprocess", "--direct-num-workers", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert digests(tmp_path / "out") == reference


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"service exited early with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"nothing listening on port {port}")


@pytest.fixture
def job_service() -> Iterator[tuple[int, int, list[int]]]:
    # The worker pool starts SDK workers as `python` from PATH: put this interpreter first.
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    job_port, pool_port = free_port(), free_port()
    loopback = [sys.executable, "-m", "pipeline.runners.loopback"]  # Beam's mains, their servers on loopback
    procs = [
        subprocess.Popen([*loopback, "apache_beam.runners.portability.local_job_service_main",
                          "--port", str(job_port)], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL),
        subprocess.Popen([*loopback, "apache_beam.runners.worker.worker_pool_main",
                          f"--service_port={pool_port}"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL),
    ]
    try:
        wait_for_port(job_port, procs[0])
        wait_for_port(pool_port, procs[1])
        yield job_port, pool_port, [p.pid for p in procs]
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def test_portable_runner_with_external_worker_pool(reference, job_service, tmp_path):
    job_port, pool_port, services = job_service
    proc = run_cli_watched(
        tmp_path / "out", "--runner", "PortableRunner", f"--job_endpoint=localhost:{job_port}",
        "--environment_type=EXTERNAL", f"--environment_config=localhost:{pool_port}", also=tuple(services),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert digests(tmp_path / "out") == reference
