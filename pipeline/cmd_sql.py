"""``fleetgrade sql OUTPUT "SELECT …"``: query the tables with DuckDB."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from pipeline.errors import UsageError

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

    from pipeline.tables import connect, present_tables

    if not present_tables(args.output):
        raise UsageError("no fleetgrade tables found", args.output, exit_code=1)
    con = connect(args.output)
    try:
        rel = con.sql(args.query)
    except duckdb.Error as exc:
        raise UsageError(str(exc), exit_code=1) from exc
    if rel is None:
        return 0
    if args.format == "table":
        rel.show(max_width=200, max_rows=200)
    elif args.format == "csv":
        _csv(rel)
    else:
        import orjson

        cols = rel.columns
        rows = [dict(zip(cols, r, strict=True)) for r in rel.fetchall()]
        sys.stdout.write(orjson.dumps(rows, default=str, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


def _csv(rel: duckdb.DuckDBPyRelation) -> None:
    import csv

    writer = csv.writer(sys.stdout)
    writer.writerow(rel.columns)
    writer.writerows(rel.fetchall())
