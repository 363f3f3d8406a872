"""Peak RSS per worker at two (or more) fleet sizes, and throughput scaling between them.

Each measurement runs in a fresh subprocess (``python -m bench.memory --child MODE FLEET RUNS``) so
peaks do not leak between measurements; the child reports VmHWM from /proc/self/status
(ru_maxrss where /proc is absent). The in-process pipeline runs runner and worker as one
process, so its VmHWM includes the runner's buffers of every collection crossing a stage; the
multi-process pipeline reports its coordinator and, apart, its largest worker (ru_maxrss of the
children). Fleets are small-file fleets whose history (days) grows with the run count
(``bench.common.small_file_fleet``): the run count, not run size, must not make memory grow.

The Beam floor is what the local runner needs to discover the fleet: the pipeline's own
discovery step (the fleet listed and decided against the empty state, the runs to grade
spread over the workers in batches, one shuffle), nothing graded or written. Its growth from
the small to the large fleet is the runner's and discovery's (the runner holds a shuffle whole,
which a distributed runner splits into bundles); the pipeline's growth is read against it,
and against the plain loop's (the grading core's own).
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

from bench.common import BENCH_DIR, manifest, row, small_file_fleet
from tools.synth import MANIFEST


def _peak_rss_mb() -> float:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child(mode: str, root: Path, runs: int) -> dict[str, Any]:
    """One measurement; ``runs`` is the fleet's run count, counted by the parent: a 10k-run
    fleet's manifest took ~8 MiB to load, which was the benchmark's memory, not the pipeline's."""
    # Imports first, so that the start-up peak is reported apart from the work's.
    from bench.common import plain_loop
    from bench.pipeline import run_pipeline

    base = _peak_rss_mb()
    if mode == "loop":
        loop = plain_loop(root, keep_timings=False)
        seconds = loop.seconds
        if loop.count != runs:
            raise RuntimeError(f"the plain loop found {loop.count} runs in {root}, its manifest lists {runs}")
    elif mode in FLOORS:
        seconds = beam_floor(root, MODES[FLOORS[mode]], runs)
    else:
        seconds = run_pipeline(root, MODES[mode])
    # Workers of the multi-process runner are this process's children, ended and waited for
    # by the runner: ru_maxrss of the children is the peak of the largest one.
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"mode": mode, "runs": runs, "seconds": seconds, "peak_rss_mb": _peak_rss_mb(), "import_rss_mb": base,
            "worker_peak_rss_mb": workers}


# The in-process runner holds every collection that crosses a stage (its shuffle) in this one
# process; the multi-process runner keeps it in the coordinator, and its workers hold only the
# bundle they run, as Dataflow workers do (their shuffle is a service).
MODES = {"pipeline": "in-process", "pipeline-mp": "multi-process x2"}
FLOORS = {"floor": "pipeline", "floor-mp": "pipeline-mp"}  # the Beam floor of each pipeline mode


def beam_floor(root: Path, mode: str, runs: int) -> float:
    """Seconds to list the fleet of ``runs`` runs, decide each against an empty state and spread
    them over the workers, as the pipeline's discovery does, on the local runner."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner
    from apache_beam.testing.util import assert_that, equal_to

    from bench.pipeline import MODES as RUNNER_OPTIONS
    from graders.families.trace_rules.config import default_config
    from graders.grading.plan import PlanSet, default_plan
    from transforms.heap import tune_heap
    from transforms.incremental import DiscoverAndDecide

    nothing = BENCH_DIR / "out" / "no-state-here"  # never written: the first run's empty state
    tune_heap()  # the runner process as ``fleetgrade run`` sets it up, as bench.pipeline does
    started = time.perf_counter()
    with beam.Pipeline(runner=FnApiRunner(), options=PipelineOptions([], **RUNNER_OPTIONS[mode])) as p:
        todo, _ = p | DiscoverAndDecide(str(root.resolve()), str(nothing), PlanSet(default_plan()), default_config())
        # Discovery also hands on the fleet's manifest, a root file that Prepare skips as no
        # session: a candidate like any run folder.
        candidates = runs + (root / MANIFEST).exists()
        assert_that(todo | beam.combiners.Count.Globally(), equal_to([candidates]))
    return time.perf_counter() - started


def measure(mode: str, root: Path, runs: int) -> dict[str, Any]:
    """One measurement of ``mode`` on the fleet at ``root``, of ``runs`` runs, in a fresh process."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path.cwd()), env.get("PYTHONPATH", "")) if p)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "bench.memory", "--child", mode, str(root), str(runs)],
                          capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"memory child {mode} {root} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall"] = time.perf_counter() - started
    return result


def run(quick: bool, sizes: tuple[int, ...] | None = None) -> list[dict[str, Any]]:
    """Each mode at each fleet size (1k and 10k runs; 200 and 1k quick; ``sizes`` when given,
    e.g. ``python -m bench --only memory --memory-runs 1000,10000,30000``), every peak and speed
    as a ratio to the smallest fleet's."""
    sizes = sizes or ((200, 1000) if quick else (1000, 10000))
    fleets = {n: small_file_fleet(11, n, shapes_every=min(sizes)) for n in sizes}
    counts = {n: len(manifest(root)) for n, root in fleets.items()}  # read once, not per measurement
    rows = []
    for mode in ("loop", "floor", "pipeline", "floor-mp", "pipeline-mp"):
        got = [measure(mode, fleets[n], counts[n]) for n in sizes]
        # The pipeline's peaks are judged; the plain loop and the Beam floors are references.
        target = "memory" if mode in MODES else ""
        label = {"loop": "plain loop", "pipeline": "pipeline in-process", "pipeline-mp": "pipeline multi-process x2",
                 "floor": "Beam floor in-process", "floor-mp": "Beam floor multi-process x2"}[mode]
        if mode in ("pipeline-mp", "floor-mp"):
            rows += _peaks(f"{label}, largest worker", [g["worker_peak_rss_mb"] for g in got], sizes, target)
            rows += _peaks(f"{label}, coordinator", [g["peak_rss_mb"] for g in got], sizes, target)
        else:
            rows += _peaks(label, [g["peak_rss_mb"] for g in got], sizes, target,
                           note=f"after imports {got[0]['import_rss_mb']:.0f}")
        if mode in FLOORS:
            continue  # a floor's speed says nothing about grading
        speeds = [g["runs"] / g["seconds"] for g in got]
        rows.append(row(f"{label}: runs/s at {sizes[0]} runs", speeds[0], "runs/s"))
        rows += [row(f"{label}: runs/s at {n} runs (scaling)", v, "runs/s", baseline=speeds[0], ratio=v / speeds[0])
                 for n, v in zip(sizes[1:], speeds[1:], strict=True)]
    return rows


def _peaks(label: str, peaks: list[float], sizes: tuple[int, ...], target: str,
           note: str = "") -> list[dict[str, Any]]:
    base = peaks[0]
    return [row(f"{label}: peak RSS at {sizes[0]} runs", base, "MiB", note=note)] + [
        row(f"{label}: peak RSS at {n} runs", peak, "MiB", baseline=base, ratio=peak / base,
            note=f"{peak - base:+.1f} MiB", target=target)
        for n, peak in zip(sizes[1:], peaks[1:], strict=True)]


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        print(json.dumps(_child(sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]))))
    else:
        print("usage: python -m bench.memory --child loop|floor|pipeline|floor-mp|pipeline-mp FLEET RUNS",
              file=sys.stderr)
        sys.exit(2)
