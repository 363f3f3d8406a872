"""The grading core's own speed: preprocessing + all graders per run in a plain loop.

Compared with the JSON-parse floor: orjson parsing exactly the bytes preprocessing read
(every JSONL line and JSON file), with no grading. The ratio grading speed / floor speed is
reported over the whole fleet and over the large runs only (where per-line cost dominates).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson

from bench.common import LARGE_TIERS, LoopResult, core_fleet, plain_loop, row


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


def parse_floor(root: Path, loop: LoopResult) -> dict[str, float]:
    """Seconds per run folder to read and orjson-parse the files the loop's preprocessing read."""
    out = {}
    for r in loop.runs:
        t0 = time.perf_counter()
        _parse_files(root / r.folder, r.files_read)
        out[r.folder] = time.perf_counter() - t0
    return out


def measure(root: Path, repeats: int) -> tuple[LoopResult, dict[str, float]]:
    """Best of ``repeats`` for both, interleaved so that machine noise hits both alike."""
    best_loop: LoopResult | None = None
    best_floor: dict[str, float] | None = None
    for _ in range(repeats):
        loop = plain_loop(root)
        floor = parse_floor(root, loop)
        if best_loop is None or loop.seconds < best_loop.seconds:
            best_loop = loop
        if best_floor is None or sum(floor.values()) < sum(best_floor.values()):
            best_floor = floor
    assert best_loop is not None and best_floor is not None
    return best_loop, best_floor


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
                baseline=large_floor, ratio=large_floor / large_s),
        ]
    return rows
