"""``fleetgrade sql OUTPUT "SELECT …"``: query the tables with DuckDB."""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from typing import TYPE_CHECKING

from graders.runs.console import printable
from pipeline.console import json_text, printable_lines
from pipeline.errors import UsageError, literal_path
from pipeline.interrupts import interruptible

if TYPE_CHECKING:
    import duckdb


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "sql",
        help="run a DuckDB query over the output tables (one view per table)",
        description="Views: grader_results, runs, dead_letter, … with workflow and date columns.",
    )
    p.add_argument("output", help="the output folder of `fleetgrade run`")
    p.add_argument("query", help="a SQL query, e.g. \"SELECT status, count(*) FROM grader_results GROUP BY 1\"")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    import duckdb

    from pipeline.tables import connect, explain, present_tables

    literal_path(args.output, "the output folder")
    if args.output.startswith("gs://"):  # DuckDB would fetch its httpfs extension from the network first
        raise UsageError("reads a local output folder (copy the tables from gs:// first)", args.output)
    if not present_tables(args.output):
        raise UsageError("no fleetgrade tables found", args.output)
    con = connect(args.output)
    try:  # the query runs in a thread, so that Ctrl-C interrupts it (pipeline/interrupts.py)
        interruptible(con.interrupt, lambda: _answer(con, args.query, args.format))
    except duckdb.Error as exc:  # the query's mistake, or a damaged file it read
        raise explain(args.output, exc) from exc
    return 0


def _answer(con: duckdb.DuckDBPyConnection, query: str, fmt: str) -> None:
    rel = con.sql(query)
    if rel is None:
        return
    if fmt == "table":
        _table(rel)
    elif fmt == "csv":
        _csv(rel)
    else:
        cols = rel.columns
        sys.stdout.write(json_text([dict(zip(cols, r, strict=True)) for r in rel.fetchall()]))


def _table(rel: duckdb.DuckDBPyRelation) -> None:
    """DuckDB's box (it shows C0 controls as ``\\n``, ``\\e``…), each line escaped for the rest (C1, bidi)."""
    box = io.StringIO()
    with contextlib.redirect_stdout(box):  # DuckDB prints through Python's print
        rel.show(max_width=200, max_rows=200)
    sys.stdout.write(printable_lines(box.getvalue()))


def _csv(rel: duckdb.DuckDBPyRelation) -> None:
    import csv

    writer = csv.writer(sys.stdout)
    writer.writerow(rel.columns)
    rows = rel.fetchall()
    if sys.stdout.isatty():  # a terminal shows the text escaped; a file or a pipe gets it as stored
        rows = [tuple(printable(v) if isinstance(v, str) else v for v in row) for row in rows]
    writer.writerows(rows)
