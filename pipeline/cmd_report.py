"""``fleetgrade report OUTPUT [--html FILE]``: one self-contained HTML report over the output tables."""

from __future__ import annotations

import argparse
import datetime as dt
import os
from pathlib import Path

from graders.runs.console import printable
from pipeline.errors import UsageError, closest, literal_path


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a YYYY-MM-DD date: {text!r}") from None


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "report",
        help="write a static HTML report (regressions, pass rates, distributions, worst runs, …)",
        description="Query the output tables with DuckDB and write one self-contained HTML file.",
    )
    p.add_argument("output", help="the output folder of `fleetgrade run`")
    p.add_argument("--html", metavar="FILE", help="where to write the report (default: OUTPUT/report.html)")
    p.add_argument("--since", type=_date, metavar="YYYY-MM-DD", help="first date included")
    p.add_argument("--until", type=_date, metavar="YYYY-MM-DD", help="last date included")
    p.add_argument("--workflow", action="append", default=[], metavar="W",
                   help="only these workflows (repeatable; names follow the flag, so give OUTPUT first)", nargs="+")
    p.set_defaults(func=handle)


def _check_workflows(output: str, wanted: tuple[str, ...]) -> None:
    """Each ``--workflow`` has rows in some table, or the report would be silently empty."""
    from pipeline.tables import connect, present_tables

    tables = present_tables(output)
    if not tables:
        return  # no tables at all: said below
    con = connect(output)
    known = sorted({w for table in tables for (w,) in con.execute(
        f"SELECT DISTINCT workflow FROM {table} WHERE workflow IS NOT NULL").fetchall()})
    for name in wanted:
        if name not in known:
            raise UsageError(f"--workflow {name!r} has no rows in this output{closest(name, known, 'workflows')}",
                             output)


def handle(args: argparse.Namespace) -> int:
    import duckdb

    from pipeline.report.queries import collect
    from pipeline.report.render import render
    from pipeline.report.scope import Selection
    from pipeline.tables import explain

    literal_path(args.output, "the output folder")
    if args.output.startswith("gs://"):
        raise UsageError("reads a local output folder (copy the tables from gs:// first)", args.output)
    if not Path(args.output).is_dir():
        raise UsageError("not a folder", args.output)
    if args.since and args.until and args.since > args.until:
        raise UsageError(f"--since {args.since} is after --until {args.until}")
    workflows = tuple(w for group in args.workflow for w in group)
    try:
        if workflows:
            _check_workflows(args.output, workflows)
        data = collect(args.output, Selection(args.since, args.until, workflows))
    except duckdb.Error as exc:  # the report's own queries: the tables could not be read
        raise explain(args.output, exc, args.output, own_query=True) from exc
    if not data.tables:
        raise UsageError("no fleetgrade tables found", args.output)
    page = render(data)
    target = Path(args.html) if args.html else Path(args.output) / "report.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    # Write then rename, so a reader never sees a half-written report.
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        tmp.write_text(page, encoding="utf-8")
        os.replace(tmp, target)
    except BaseException:  # a full disk, Ctrl-C: no half page left beside the report
        tmp.unlink(missing_ok=True)
        raise
    print(printable(str(target)))
    return 0
