"""``python -m bench [--quick] [--json FILE] [--check]``: run every benchmark part and print one
table, ending with the targets judged from it (``bench/targets.py``).

Each part is a module ``bench/<part>.py`` with ``run(quick: bool) -> list[dict]``; a row has
``part``, ``name``, ``value``, ``unit`` and optionally ``baseline`` and ``ratio``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import time
from typing import Any

from bench.targets import all_met, judge

# "trajectory" and "inline_js" come from other branches; absent modules are skipped with a note.
PARTS: tuple[str, ...] = ("startup", "core", "pipeline", "memory", "trajectory", "inline_js", "tiers", "stats",
                          "fixedcost", "dask", "remote")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench")
    parser.add_argument("--quick", action="store_true", help="small sizes (< 2 minutes on 2 cores)")
    parser.add_argument("--json", default=".bench/results.json", help="where to write the rows")
    parser.add_argument("--only", action="append", default=[], help="run only these parts")
    parser.add_argument("--memory-runs", default="",
                        help="fleet sizes of the memory part, comma-separated (default 1000,10000; quick 200,1000)")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 unless every target is measured and met (bench/targets.py)")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    for part in PARTS:
        if args.only and part not in args.only:
            continue
        if importlib.util.find_spec(f"bench.{part}") is None:
            print(f"note: bench part {part!r} is not present (bench/{part}.py); skipped", flush=True)
            continue
        print(f"running {part}{' (quick)' if args.quick else ''} …", flush=True)
        started = time.perf_counter()
        mod = importlib.import_module(f"bench.{part}")
        if part == "memory" and args.memory_runs:
            part_rows = mod.run(args.quick, tuple(int(n) for n in args.memory_runs.split(",")))
        else:
            part_rows = mod.run(args.quick)
        print(f"  {part} done in {time.perf_counter() - started:.1f}s", flush=True)
        for row in part_rows:
            row.setdefault("part", part)
        rows.extend(part_rows)
    judged = judge(rows, quick=args.quick)
    for row in judged:
        row["part"] = "targets"
    rows.extend(judged)
    print(f"{'part':<12} {'measure':<58} {'value':>14} {'unit':<10} {'ratio':>8}  note")
    for r in rows:
        ratio = f"{r['ratio']:.2f}" if isinstance(r.get("ratio"), (int, float)) else ""
        value = f"{r['value']:.4g}" if isinstance(r["value"], (int, float)) else "-"
        print(f"{r['part']:<12} {r['name']:<58} {value:>14} {r['unit']:<10} {ratio:>8}  {r.get('note', '')}")
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as fh:
        json.dump(rows, fh, indent=2)
    print(f"wrote {args.json}")
    return 0 if all_met(judged) or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
