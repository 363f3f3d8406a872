"""``fleetgrade synth``: write a deterministic synthetic fleet (benchmarks, load tests)."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from pipeline.synth import SHIFTABLE, Shift, SizeMix, SynthOptions, synth_fleet, valid_date


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "synth",
        help="write a deterministic synthetic fleet (heavy-tailed sizes, reruns, malformed runs)",
        description="Writes <out>/<workflow>/run-<id>/… with every gh-aw artifact kind, plus "
        "synth-manifest.json. The same --seed and options give a byte-identical tree.",
    )
    p.add_argument("--runs", type=int, required=True, help="number of run folders")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="output folder (must be empty or absent)")
    p.add_argument("--medium-fraction", type=float, default=SizeMix.medium, help="fraction of medium runs")
    p.add_argument("--large-fraction", type=float, default=SizeMix.large,
                   help="fraction of large runs (10k+ gateway lines and token records)")
    p.add_argument("--near-limit-rate", type=float, default=0.0,
                   help="fraction of runs whose gateway log is padded to about --max-file-mib (default 0: none)")
    p.add_argument("--max-file-mib", type=float, default=48.0, help="size of near-limit files (at most 49.5)")
    p.add_argument("--malformed-rate", type=float, default=0.03, help="fraction of deliberately malformed runs")
    p.add_argument("--rerun-rate", type=float, default=0.06, help="fraction of runs that get an attempt 2")
    p.add_argument("--days", type=int, default=5, help="spread created_at over this many dates")
    p.add_argument("--shapes-every", type=int, default=0, metavar="N",
                   help="run i repeats the size and contents of run i mod N (default 0: every run drawn "
                   "anew); a larger fleet then differs in run count only")
    p.add_argument("--start-date", default=SynthOptions.start_date, help="first date of the fleet (YYYY-MM-DD)")
    p.add_argument("--shift", action="append", default=[], metavar="WORKFLOW:GRADER:DATE:EFFECT",
                   help="plant a change: runs of WORKFLOW from DATE on get EFFECT added to "
                   + "; ".join(f"{g}: {what}" for g, what in SHIFTABLE.items()) + " (repeatable)")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if args.runs < 0:
        print("fleetgrade synth: --runs must be >= 0", file=sys.stderr)
        return 2
    if args.shapes_every < 0:
        print("fleetgrade synth: --shapes-every must be >= 0", file=sys.stderr)
        return 2
    if not valid_date(args.start_date):
        print(f"fleetgrade synth: --start-date must be YYYY-MM-DD, got {args.start_date!r}", file=sys.stderr)
        return 2
    try:
        shifts = tuple(Shift.parse(text) for text in args.shift)
    except ValueError as exc:
        print(f"fleetgrade synth: {exc}", file=sys.stderr)
        return 2
    if out.exists() and any(out.iterdir()):
        print(f"fleetgrade synth: {out}: not empty; refusing to mix fleets", file=sys.stderr)
        return 1
    opts = SynthOptions(
        runs=args.runs, seed=args.seed, mix=SizeMix(args.medium_fraction, args.large_fraction),
        near_limit_rate=args.near_limit_rate, max_file_mib=args.max_file_mib,
        malformed_rate=args.malformed_rate, rerun_rate=args.rerun_rate, days=args.days,
        shapes_every=args.shapes_every, start_date=args.start_date, shifts=shifts,
    )
    entries = synth_fleet(out, opts)
    tiers = Counter(e.tier for e in entries)
    dead = sum(e.expected == "dead_letter" for e in entries)
    total = sum(e.bytes for e in entries)
    print(f"wrote {len(entries)} run(s), {total / 1e6:.1f} MB under {out}: "
          + ", ".join(f"{n} {t}" for t, n in sorted(tiers.items()))
          + f"; {sum(e.malformed is not None for e in entries)} malformed ({dead} to be dead-lettered)")
    return 0
