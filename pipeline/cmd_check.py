"""``fleetgrade check OUTPUT``: the nightly gate on ``regressions`` (docs/statistics.md).

Exit 1 when a cell is ``regressed`` at the chosen false-discovery rate and minimum effect, 0
otherwise, 2 on bad usage, and :data:`UNTESTED_EXIT` when no cell could be tested at all (a gate
that tested nothing must not pass; ``--allow-untested`` lets it). Cells never graded in either
window (the grader was unavailable or errored on every run) are counted apart: more runs would
not make them testable. No Beam: the stored table is read with pyarrow, or recomputed from the
stored grades with the pure core when other windows are asked for.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

import duckdb

from graders.stats.cells import DEFAULT_BASELINE, DEFAULT_FDR, DEFAULT_WINDOW, MIN_RUNS, verdict
from pipeline.console import json_text, shown_rows
from pipeline.errors import UsageError, closest, literal_path, one_line
from pipeline.options import days
from pipeline.stats_read import (
    CHANGED,
    copy_table,
    graded,
    has_table,
    history_span,
    recompute_regressions,
    stored_regressions,
    stored_windows,
    worst_first,
)
from pipeline.tables import explain

COLUMNS = ("workflow", "grader", "verdict", "current", "baseline", "diff [95% interval]", "q", "change")
# No cell could be tested (docs/command-line.md): not 0, since the gate saw nothing, and apart
# from 1 (a regression) and 2 (a usage mistake), like pytest's 5 when it collected no test.
UNTESTED_EXIT = 5


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return value


def _non_negative(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return value


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "check",
        help="exit 1 when a workflow's grades regressed (the table regressions; a CI gate after `run`)",
        description="Prints the regressions table worst first. Exit status: 1 when any cell is "
        f"'regressed' at --fdr and --min-effect, {UNTESTED_EXIT} when no cell could be tested (too little "
        "history), 0 otherwise, 2 on bad usage.",
    )
    p.add_argument("output", help="the output folder of `fleetgrade run`")
    p.add_argument("--fdr", type=_fraction, default=DEFAULT_FDR,
                   help="false-discovery rate: a cell counts when its BH q-value is at most this (default 0.05)")
    p.add_argument("--min-effect", type=_non_negative, default=0.0, metavar="SD",
                   help="smallest change that counts, in standard deviations of the baseline (default 0)")
    p.add_argument("--window", type=days, help="current window in days (default: the windows `run` stored, "
                   "--regression-window, else 7)")
    p.add_argument("--baseline", type=days, help="baseline window in days before it (default: the windows `run` "
                   "stored, --regression-baseline, else 28)")
    p.add_argument("--workflow", action="append", default=[], help="only this workflow (repeatable)")
    p.add_argument("--grader", action="append", default=[], help="only this grader id (repeatable)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--allow-untested", action="store_true",
                   help=f"exit 0 rather than {UNTESTED_EXIT} when no cell could be tested (a new fleet's first weeks)")
    p.set_defaults(func=handle)


def _num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def _cells(r: dict[str, Any]) -> tuple[str, ...]:
    diff = "-"
    if r.get("diff") is not None:
        diff = f"{r['diff']:+.3g}"
        if r.get("diff_low") is not None:
            diff += f" [{r['diff_low']:+.3g}, {r['diff_high']:+.3g}]"
    state = r["verdict"]
    if state == "insufficient-data" and r.get("runs_needed"):
        state += f" (needs {r['runs_needed']} more run(s))"
    # A change date says where a change happened: on a cell not called changed it would mislead.
    change = (r.get("change_date") or "-") if state in CHANGED else "-"
    return (r["workflow"], r["grader_id"], state, f"{_num(r.get('mean_current'))} (n={r['n_current']})",
            f"{_num(r.get('mean_baseline'))} (n={r['n_baseline']})", diff, _num(r.get("q_value"), 2), change)


def _table(rows: list[dict[str, Any]]) -> str:
    body = [COLUMNS, *(_cells(r) for r in rows)]
    widths = [max(len(line[i]) for line in body) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in body)


def _regressions(args: argparse.Namespace) -> list[dict[str, Any]]:
    out = literal_path(args.output, "the output folder")
    if out.startswith("gs://"):
        return _stored_on_gcs(args)
    if not Path(out).is_dir():
        raise UsageError("no such output folder", out)
    if not has_table(out, "grader_results"):
        raise UsageError("no grader_results table; run `fleetgrade run` first", out)
    _resolve_windows(args, out)
    rows = stored_regressions(out, args.window, args.baseline)
    return recompute_regressions(out, args.window, args.baseline) if rows is None else rows


def _resolve_windows(args: argparse.Namespace, stored_in: str) -> None:
    """Without --window and --baseline, the windows `fleetgrade run` stored (a team that runs
    with --regression-window 14 gates on 14 days without repeating it); a flag given alone
    pairs with the other's default, 7 or 28."""
    if args.window is None and args.baseline is None:
        args.window, args.baseline = stored_windows(stored_in) or (DEFAULT_WINDOW, DEFAULT_BASELINE)
    args.window = DEFAULT_WINDOW if args.window is None else args.window
    args.baseline = DEFAULT_BASELINE if args.baseline is None else args.baseline


def _copy_from_gcs(output: str, table: str, into: str) -> int:
    """``copy_table``, its mistakes in one line: no credentials (said as `run` says it), no bucket, no access."""
    from google.api_core import exceptions as gcs_errors
    from google.auth.exceptions import DefaultCredentialsError

    from transforms.gcs import HOW_TO_AUTHENTICATE

    bucket = "gs://" + output[5:].split("/", 1)[0]
    try:
        return copy_table(output, table, into)
    except DefaultCredentialsError as exc:
        raise UsageError(HOW_TO_AUTHENTICATE, output) from exc
    except gcs_errors.NotFound as exc:
        raise UsageError("the bucket does not exist", bucket) from exc
    except (gcs_errors.Forbidden, gcs_errors.Unauthorized) as exc:
        raise UsageError(f"the credentials found may not read it ({' '.join(str(exc).split())[:200]})",
                         output) from exc


def _stored_on_gcs(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The stored ``regressions`` of a gs:// output, read from a local copy of that table only
    (one row per workflow and grader): other windows would need the whole history of grades."""
    with tempfile.TemporaryDirectory(prefix="fleetgrade-check-") as tmp:
        if not _copy_from_gcs(args.output, "regressions", tmp):
            raise UsageError("no regressions table; run `fleetgrade run` first", args.output)
        _resolve_windows(args, tmp)
        rows = stored_regressions(tmp, args.window, args.baseline)
        stored = stored_windows(tmp)
    if rows is None:
        have = f" (--window {stored[0]} --baseline {stored[1]})" if stored else ""
        raise UsageError(f"on gs:// only the windows `fleetgrade run` stored can be checked{have}; copy the "
                         f"output locally for --window {args.window} --baseline {args.baseline}", args.output)
    return rows


def handle(args: argparse.Namespace) -> int:
    out = args.output
    try:
        rows = _regressions(args)
    except duckdb.Error as exc:  # a damaged partition file, named
        raise explain(out, exc, out) from exc
    known = {r["workflow"] for r in rows}, {r["grader_id"] for r in rows}
    for flag, wanted, present in (("--workflow", args.workflow, known[0]), ("--grader", args.grader, known[1])):
        missing = sorted(set(wanted) - present)
        if missing:
            kind = "workflows" if flag == "--workflow" else "graders"
            raise UsageError(f"{flag} {missing[0]} has no regressions rows{closest(missing[0], present, kind)}", out)
    rows = [{**r, "verdict": verdict(r, args.fdr, args.min_effect)} for r in rows
            if (not args.workflow or r["workflow"] in args.workflow)
            and (not args.grader or r["grader_id"] in args.grader)]
    never = [r for r in rows if not graded(r)]
    rows = worst_first([r for r in rows if graded(r)])
    counts = {v: sum(r["verdict"] == v for r in rows) for v in ("regressed", "improved", "no-change",
                                                                "insufficient-data")}
    tested = len(rows) - counts["insufficient-data"]
    if args.json:
        doc = {"fdr": args.fdr, "min_effect": args.min_effect, "window": args.window, "baseline": args.baseline,
               "regressed": counts["regressed"], "tested": tested, "untested": counts["insufficient-data"],
               "never_graded": [{"workflow": r["workflow"], "grader_id": r["grader_id"]} for r in never],
               "rows": rows}
        sys.stdout.write(json_text(doc))
    elif tested or args.allow_untested:
        print(_table(shown_rows(rows)))  # names from artifacts, escaped
        print(f"\n{len(rows)} cell(s): " + ", ".join(f"{n} {v}" for v, n in counts.items())
              + f" (q ≤ {args.fdr:g}, |effect| ≥ {args.min_effect:g} SD; {args.window} days vs the "
              f"{args.baseline} before)")
        if never:
            print(_never_line(never))
        if any(r["verdict"] == "no-change" and _excludes_zero(r) for r in rows):
            print("A no-change cell's interval may exclude 0: the interval is the cell's own, its q corrects for "
                  f"the {tested} cells tested together (Benjamini-Hochberg); only q decides (docs/statistics.md).")
    if not tested:
        print(one_line("check", _untested_line(args, counts["insufficient-data"], len(never))), file=sys.stderr)
        return 0 if args.allow_untested else UNTESTED_EXIT
    return 1 if counts["regressed"] else 0


def _excludes_zero(r: dict[str, Any]) -> bool:
    low, high = r.get("diff_low"), r.get("diff_high")
    return low is not None and high is not None and (low > 0 or high < 0)


def _never_line(never: list[dict[str, Any]]) -> str:
    """The cells no run gave a value to, as one line per the graders concerned."""
    graders = sorted({r["grader_id"] for r in never})
    return (f"{len(never)} more cell(s) never graded in either window (the grader was unavailable or errored on "
            f"every run; more runs will not change that): {', '.join(graders)}")


def _untested_line(args: argparse.Namespace, short: int, never: int) -> str:
    span = history_span(args.output, args.workflow)
    history = f"; the runs span {span} day(s)" if span is not None else ""
    text = (f"nothing could be tested: {short} cell(s) need more history; the baseline window needs runs in "
            f"the {args.baseline} days before the last {args.window} ({MIN_RUNS} graded runs in each window){history}")
    if never:
        text += f"; {never} cell(s) never graded (unavailable or errored on every run)"
    return text + ("" if args.allow_untested else "; --allow-untested exits 0")
