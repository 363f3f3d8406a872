"""The grading core's own speed: preprocessing + all graders per run in a plain loop.

Compared with the JSON-parse floor: orjson parsing exactly the bytes preprocessing read
(every JSONL line and JSON file), with no grading. The ratio grading speed / floor speed is
reported over the whole fleet and over the large runs only (where per-line cost dominates).
Both sides are a run's best time over the repeats, the two measured back to back per run
(``measure``); runs/s and MB/s are over those best times too.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson

from bench.common import (
    LARGE_TIERS,
    LoopResult,
    RunTiming,
    core_fleet,
    loop_one,
    loop_setup,
    manifest_entries,
    row,
)


def _parse_files(root: Path, rels: list[str]) -> None:
    for rel in rels:
        with open(root / rel, "rb") as fh:
            data = fh.read()
        if rel.endswith(".jsonl"):
            for line in data.split(b"\n"):
                line = line.strip()
                if line:
                    try:
                        orjson.loads(line)
                    except orjson.JSONDecodeError:
                        pass
        else:
            try:
                orjson.loads(data)
            except orjson.JSONDecodeError:
                pass


def _floor_one(root: Path, run: RunTiming) -> float:
    """Seconds to read and orjson-parse the files the loop's preprocessing read in one run."""
    t0 = time.perf_counter()
    _parse_files(root / run.folder, run.files_read)
    return time.perf_counter() - t0


def measure(root: Path, repeats: int) -> tuple[LoopResult, dict[str, float]]:
    """Per run, the best of ``repeats`` for the loop and for the floor, measured back to back.

    Each run's floor is timed right after the loop's work on it, so that a burst of load from
    the machine's other tenants lands on both sides of the ratio, and the best time of each
    run is kept: the ratio of sums of per-run bests, not of two whole passes minutes apart.
    """
    plan, rules = loop_setup()
    best: dict[str, RunTiming] = {}
    floor: dict[str, float] = {}
    entries = manifest_entries(root)
    for _ in range(repeats):
        for folder, tier in entries:
            timing = loop_one(root, folder, tier, plan, rules)
            seconds = _floor_one(root, timing)
            if folder not in best or timing.seconds < best[folder].seconds:
                best[folder] = timing
            floor[folder] = min(seconds, floor.get(folder, seconds))
    runs = [best[folder] for folder, _ in entries]
    return LoopResult(sum(r.seconds for r in runs), runs, len(runs)), floor


def run(quick: bool) -> list[dict[str, Any]]:
    root = core_fleet(quick)
    loop, floor = measure(root, 2 if quick else 3)
    n = len(loop.runs)
    mb = loop.bytes_read / 1e6
    prep_s = sum(r.prepare_seconds for r in loop.runs)
    floor_s = sum(floor.values())
    large_s, large_b, large_n = loop.subset(LARGE_TIERS)
    large_floor = sum(floor[r.folder] for r in loop.runs if r.tier in LARGE_TIERS)
    rows = [
        row(f"fleet: runs (large) / MB read [{root.name}]", n, "runs", note=f"{large_n} large, {mb:.1f} MB"),
        row("plain loop: runs/s (1 core)", n / loop.seconds, "runs/s"),
        row("plain loop: MB/s (1 core)", mb / loop.seconds, "MB/s"),
        row("plain loop: share of time in read+preprocess", prep_s / loop.seconds, "fraction"),
        row("orjson parse floor: MB/s (1 core)", mb / floor_s, "MB/s"),
        row("grading speed / parse-floor speed (all runs)", floor_s / loop.seconds, "ratio",
            baseline=floor_s, ratio=floor_s / loop.seconds),
    ]
    if large_n:
        rows += [
            row("plain loop: MB/s on large runs", large_b / 1e6 / large_s, "MB/s"),
            row("grading speed / parse-floor speed (large runs)", large_floor / large_s, "ratio",
                baseline=large_floor, ratio=large_floor / large_s, target="core"),
        ]
    return rows
