"""``fleetgrade bigquery-ddl gs://bucket/graded --dataset D``: BigQuery external tables over the output."""

from __future__ import annotations

import argparse
import re
import sys

from pipeline.bigquery import UnmappedTypeError, all_ddl

# BigQuery dataset ids, optionally project-qualified; anything else would break the quoted identifier.
_DATASET = re.compile(r"^(?:[A-Za-z0-9_.:-]+\.)?[A-Za-z0-9_]+$")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "bigquery-ddl",
        help="print CREATE EXTERNAL TABLE statements for the output tables",
        description="One hive-partitioned external table per fleetgrade table, types from the Arrow schemas.",
    )
    p.add_argument("prefix", metavar="OUTPUT_GCS_PREFIX", help="the --output of `fleetgrade run`, e.g. gs://b/graded")
    p.add_argument("--dataset", required=True, help="BigQuery dataset, e.g. analytics or my-project.analytics")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    if not _DATASET.match(args.dataset):
        print(f"fleetgrade bigquery-ddl: invalid dataset name {args.dataset!r}", file=sys.stderr)
        return 2
    if "'" in args.prefix or "\\" in args.prefix:
        print(f"fleetgrade bigquery-ddl: invalid prefix {args.prefix!r}", file=sys.stderr)
        return 2
    try:
        sys.stdout.write(all_ddl(args.prefix, args.dataset))
    except UnmappedTypeError as exc:
        print(f"fleetgrade bigquery-ddl: {exc}", file=sys.stderr)
        return 1
    return 0
