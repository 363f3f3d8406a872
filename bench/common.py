"""Shared benchmark helpers: cached synthetic fleets and the plain-loop baseline.

Fleets are generated once under ``.bench/fleets/<seed>-<n>[-<variant>]/`` (written to a
temporary folder and renamed, so an interrupted generation is never reused).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graders.families.trace_rules.config import TraceConfig, default_config
from graders.grading.plan import GradingPlan, PlanSet, default_plan
from graders.one_run import RunGrader
from graders.prepare import prepare_run
from graders.runs.runfiles import local_run_files
from tools.synth import MANIFEST, SizeMix, SynthOptions, synth_fleet, synth_options
from transforms.discover import ListRuns
from transforms.heap import tune_gc

BENCH_DIR = Path(os.environ.get("FLEETGRADE_BENCH_DIR", ".bench"))
LARGE_TIERS = frozenset({"large", "near-limit"})


# Judging on fleets nothing was tuned on (issue 39): every part's fleets drawn with another seed
# (this offset added to each) and another spread of runs over the workflows.
SEED_OFFSET = int(os.environ.get("FLEETGRADE_BENCH_SEED", "0"))
WORKFLOW_SKEW = os.environ.get("FLEETGRADE_BENCH_WORKFLOW_SKEW", "")


def fleet(seed: int, runs: int, variant: str = "", **options: Any) -> Path:
    """The cached fleet ``<seed>-<runs>[-variant]``; ``options`` are SynthOptions fields."""
    seed += SEED_OFFSET
    if WORKFLOW_SKEW:
        options["workflow_skew"] = float(WORKFLOW_SKEW)
        variant = f"{variant}-skew{WORKFLOW_SKEW}" if variant else f"skew{WORKFLOW_SKEW}"
    name = f"{seed}-{runs}" + (f"-{variant}" if variant else "")
    out = BENCH_DIR / "fleets" / name
    opts = SynthOptions(runs=runs, seed=seed, **options)
    if (out / MANIFEST).exists() and json.loads((out / MANIFEST).read_text())["options"] == synth_options(opts):
        return out
    tmp = out.with_name(name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    started = time.perf_counter()
    synth_fleet(tmp, opts)
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    print(f"  generated fleet {out} in {time.perf_counter() - started:.1f}s", flush=True)
    return out


RUNS_PER_DAY = 200  # memory fleets: ~25 runs per workflow and day, at every fleet size


def small_file_fleet(seed: int, runs: int, shapes_every: int) -> Path:
    """Small runs only (fast to generate): for memory and scaling, where the count matters.

    A larger fleet is a longer history, as in a backfill: the days grow with the runs, so a
    partition (one workflow, one day) holds about as many runs at 1k as at 10k runs. Partition
    size is a different axis: one partition is written by one worker, holding its rows.

    Run i has the size and contents of run i mod ``shapes_every`` (the smallest fleet's size),
    so every fleet holds the smallest one's run shapes over and over, and only the run count
    differs. Drawn anew, a larger fleet's heavy tail holds larger runs (the largest run of the
    1k-run fleet was 626 KB, of the 30k-run fleet 770 KB), and a peak could grow with the
    largest run rather than with the count.
    """
    return fleet(seed, runs, f"small-shapes{shapes_every}", mix=SizeMix(medium=0.03, large=0.0),
                 malformed_rate=0.01, days=max(5, runs // RUNS_PER_DAY), shapes_every=shapes_every)


def manifest(root: Path) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads((root / MANIFEST).read_text())["fleet"]
    return entries


@dataclass
class RunTiming:
    folder: str
    tier: str
    seconds: float
    prepare_seconds: float
    bytes_read: int
    files_read: list[str]
    graded: bool


@dataclass
class LoopResult:
    seconds: float
    runs: list[RunTiming] = field(default_factory=list)
    count: int = 0  # runs looped over (``runs`` is empty when timings were not kept)

    @property
    def bytes_read(self) -> int:
        return sum(r.bytes_read for r in self.runs)

    def subset(self, tiers: frozenset[str]) -> tuple[float, int, int]:
        """(seconds, bytes, runs) over the runs of ``tiers``."""
        sel = [r for r in self.runs if r.tier in tiers]
        return sum(r.seconds for r in sel), sum(r.bytes_read for r in sel), len(sel)


def plain_loop(root: Path, plan: GradingPlan | None = None, keep_timings: bool = True) -> LoopResult:
    """Preprocessing + every grader + the trace rules + the table rows, per run, in a plain loop.

    The same work as the pipeline's per run (its trace rules included), without Beam and Parquet.
    Without ``keep_timings`` nothing is kept per run, and the runs are found by the pipeline's
    own streamed discovery rather than the fleet's manifest (the memory part: a timing per run,
    or the whole manifest, is the benchmark's memory, not the core's).
    """
    plan, rules = loop_setup(plan)
    out = LoopResult(0.0)
    started = time.perf_counter()
    if keep_timings:
        entries: Iterable[tuple[str, str]] = manifest_entries(root)
    else:
        entries = ((folder, "") for folder, _ in ListRuns().process(str(root.resolve())))
    for folder, tier in entries:
        timing = loop_one(root, folder, tier, plan, rules)
        out.count += 1
        if keep_timings:
            out.runs.append(timing)
    out.seconds = time.perf_counter() - started
    return out


def loop_setup(plan: GradingPlan | None = None) -> tuple[GradingPlan, TraceConfig]:
    """The plain loop's plan and trace rules, with the start-up heap frozen after them and young
    collections relaxed, as a pipeline worker does in PrepareRun.setup."""
    plan = plan or default_plan()
    rules = default_config()
    tune_gc()
    return plan, rules


def manifest_entries(root: Path) -> list[tuple[str, str]]:
    """(folder, size tier) of each run of a generated fleet, in the manifest's order."""
    return [(e["folder"], e["tier"]) for e in manifest(root)]


def loop_one(root: Path, folder: str, tier: str, plan: GradingPlan, rules: TraceConfig) -> RunTiming:
    """The plain loop's work on one run folder, timed."""
    t0 = time.perf_counter()
    files = local_run_files(os.path.join(root, folder))  # not pathlib, see local_run_files
    graded = True
    t1 = t0
    try:
        prep = prepare_run(files, folder)
        t1 = time.perf_counter()
        RunGrader(PlanSet(plan), rules).grade(prep, strict=True)
    except Exception:  # a dead letter in the pipeline
        graded = False
    t2 = time.perf_counter()
    return RunTiming(folder, tier, t2 - t0, t1 - t0, files.bytes_read, sorted(files.file_digests), graded)


def row(name: str, value: float, unit: str, *, baseline: float | None = None, ratio: float | None = None,
        note: str = "", target: str = "") -> dict[str, Any]:
    """One table row; ``target`` names the target of ``bench/targets.py`` its ratio is judged by."""
    r: dict[str, Any] = {"name": name, "value": value, "unit": unit}
    if baseline is not None:
        r["baseline"] = baseline
    if ratio is not None:
        r["ratio"] = ratio
    if note:
        r["note"] = note
    if target:
        r["target"] = target
    return r


def core_fleet(quick: bool) -> Path:
    """The mixed fleet shared by the core and pipeline parts (heavy tail included)."""
    if quick:
        return fleet(7, 150, "mixed", mix=SizeMix(medium=0.15, large=0.03))
    # One or two runs near the file limit: realistic, but kept rare (disk and time).
    return fleet(7, 1000, "mixed", mix=SizeMix(medium=0.15, large=0.02), near_limit_rate=0.003, max_file_mib=48.0)
