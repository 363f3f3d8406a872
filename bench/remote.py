"""``fleetgrade run`` from a bucket to a bucket, through a GCS JSON API server on loopback behind a
proxy that holds every request a set time (tools/gcs_server.py): wall time at 0 and 30 ms, their
ratio, and the requests made per file read.

The fleet is uploaded once (not timed, not counted); each measurement is the real executable on
one core's worth of local runner, into a fresh output prefix. Requests are counted by the proxy:
those on the input prefix (listings and downloads) per input object downloaded, the target; and
all of them (the output's staging, partition files and commit too) per file read, for the record.
The peak RSS of the job (its process tree) is reported beside, to show the prefetch stays bounded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.common import fleet, row
from tools.gcs_server import Proxy, kind, serve
from tools.synth import SizeMix

BUCKET = "bench-fleet"
LATENCIES = (0.0, 0.030)


def _fleets(quick: bool) -> list[Path]:
    small = fleet(11, 100, "remote", mix=SizeMix(medium=0.15, large=0.02), days=7)
    if quick:
        return [small]
    return [small, fleet(11, 1000, "remote", mix=SizeMix(medium=0.15, large=0.02), days=28)]


def _upload(url: str, root: Path, prefix: str) -> int:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage  # type: ignore[attr-defined]

    os.environ["STORAGE_EMULATOR_HOST"] = url
    bucket = storage.Client(credentials=AnonymousCredentials(), project="bench").bucket(BUCKET)
    files = [p for p in sorted(root.rglob("*")) if p.is_file() and p.name != "synth-manifest.json"]

    def put(path: Path) -> None:
        bucket.blob(f"{prefix}/{path.relative_to(root).as_posix()}").upload_from_filename(str(path))

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, files))
    return len(files)


def _on_input(path: str, prefix: str) -> bool:
    parts = urllib.parse.urlsplit(path)
    listed = (urllib.parse.parse_qs(parts.query).get("prefix") or [""])[0]
    return urllib.parse.unquote(parts.path).split("/o/", 1)[-1].startswith(prefix + "/") or listed.startswith(prefix)


def _job(url: str, prefix: str, output: str) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB of the job's processes) of one ``fleetgrade run``."""
    exe = Path(sys.executable).parent / "fleetgrade"
    env = dict(os.environ, STORAGE_EMULATOR_HOST=url)
    # One core, as a Dataflow worker's bundle has: the fetch threads share it with the grading.
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    started = time.perf_counter()
    with subprocess.Popen([*pin, str(exe), "run", "--input", f"gs://{BUCKET}/{prefix}", "--output",
                           f"gs://{BUCKET}/{output}", "--log-level", "ERROR"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env) as proc:
        assert proc.stderr is not None
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)  # this job's own peak, not the bench's other children
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"fleetgrade run on gs:// failed ({proc.returncode}): {err[-2000:].decode(errors='replace')}")
    return wall, usage.ru_maxrss / 1024


def _counts(proxy: Proxy, prefix: str) -> tuple[int, int, int]:
    """(requests on the input, input files read: objects downloaded, not a 404's probe; all requests)."""
    with proxy.lock:
        log = list(proxy.log)
    on_input = [(m, p, status) for m, p, status in log if _on_input(p, prefix)]
    objects = {urllib.parse.urlsplit(p).path for m, p, status in on_input if kind(m, p) == "media" and status < 300}
    return len(on_input), len(objects), len(log)


def run(quick: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for root in _fleets(quick):
        runs = len([p for p in root.glob("*/*") if p.is_dir()])
        with serve((BUCKET,)) as (url, proxy):
            files = _upload(url, root, "fleet")
            walls: dict[float, float] = {}
            for latency in LATENCIES:
                proxy.reset()
                proxy.latency = latency
                walls[latency], peak = _job(url, "fleet", f"out-{int(latency * 1000)}ms")
                on_input, read, total = _counts(proxy, "fleet")
                ms = f"{latency * 1000:.0f} ms"
                name = f"remote {runs} runs ({files} files)"
                rows.append(row(f"{name}: wall at {ms}", walls[latency], "s"))
                rows.append(row(f"{name}: peak RSS at {ms}", peak, "MiB"))
                rows.append(row(f"{name}: input requests per file read at {ms}", on_input / max(read, 1), "req/file",
                                ratio=on_input / max(read, 1), target="remote-requests",
                                note=f"{on_input} requests, {read} files read"))
                rows.append(row(f"{name}: all requests per file read at {ms}", total / max(read, 1), "req/file",
                                note=f"{total} requests, the output's included"))
            slow, fast = walls[LATENCIES[-1]], walls[LATENCIES[0]]
            rows.append(row(f"remote {runs} runs: wall at 30 ms / at 0 ms", slow / fast, "ratio", baseline=fast,
                            ratio=slow / fast, target="remote-latency"))
    return rows
