"""Peak RSS per worker at two fleet sizes, and throughput scaling between them.

Each measurement runs in a fresh subprocess (``python -m bench.memory --child MODE FLEET``) so
peaks do not leak between measurements; the child reports VmHWM from /proc/self/status
(ru_maxrss where /proc is absent). The in-process pipeline runs its workers as threads of
that one process, so its VmHWM is the worker's peak. Fleets are small-file fleets: the run
count, not run size, is what must not make memory grow.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import row, small_file_fleet


def _peak_rss_mb() -> float:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child(mode: str, root: Path) -> dict[str, Any]:
    # Imports first, so that the start-up peak is reported apart from the work's.
    from bench.common import plain_loop
    from bench.pipeline import run_pipeline

    base = _peak_rss_mb()
    if mode == "loop":
        loop = plain_loop(root)
        seconds, runs = loop.seconds, len(loop.runs)
    else:
        from bench.common import manifest

        runs = len(manifest(root))
        seconds = run_pipeline(root, "in-process")
    return {"mode": mode, "runs": runs, "seconds": seconds, "peak_rss_mb": _peak_rss_mb(), "import_rss_mb": base}


def measure(mode: str, root: Path) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path.cwd()), env.get("PYTHONPATH", "")) if p)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "bench.memory", "--child", mode, str(root)],
                          capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"memory child {mode} {root} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall"] = time.perf_counter() - started
    return result


def run(quick: bool) -> list[dict[str, Any]]:
    small_n, large_n = (200, 1000) if quick else (1000, 10000)
    fleets = {n: small_file_fleet(11, n) for n in (small_n, large_n)}
    rows = []
    for mode in ("loop", "pipeline"):
        got = {n: measure(mode, fleets[n]) for n in (small_n, large_n)}
        a, b = got[small_n], got[large_n]
        label = "plain loop" if mode == "loop" else "pipeline in-process"
        rows += [
            row(f"{label}: peak RSS at {small_n} runs", a["peak_rss_mb"], "MiB", note=f"after imports {a['import_rss_mb']:.0f}"),
            row(f"{label}: peak RSS at {large_n} runs", b["peak_rss_mb"], "MiB", baseline=a["peak_rss_mb"],
                ratio=b["peak_rss_mb"] / a["peak_rss_mb"]),
            row(f"{label}: runs/s at {small_n} runs", a["runs"] / a["seconds"], "runs/s"),
            row(f"{label}: runs/s at {large_n} runs (scaling)", b["runs"] / b["seconds"], "runs/s",
                baseline=a["runs"] / a["seconds"], ratio=(b["runs"] / b["seconds"]) / (a["runs"] / a["seconds"])),
        ]
    return rows


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(_child(sys.argv[2], Path(sys.argv[3]))))
    else:
        print("usage: python -m bench.memory --child loop|pipeline FLEET", file=sys.stderr)
        sys.exit(2)
