"""``fleetgrade bigquery-ddl gs://bucket/graded --dataset D``: BigQuery external tables over the output."""

from __future__ import annotations

import argparse
import re
import sys

from pipeline.errors import Failure, UsageError, literal_path

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
    p.add_argument("--local-uris", action="store_true",
                   help="accept a prefix that is not gs:// (the DDL then names URIs BigQuery cannot read)")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from pipeline.bigquery import UnmappedTypeError, all_ddl

    if not _DATASET.match(args.dataset):
        raise UsageError(f"invalid dataset name {args.dataset!r}")
    if "'" in args.prefix or "\\" in args.prefix:
        raise UsageError(f"invalid prefix {args.prefix!r}")
    literal_path(args.prefix, "the prefix")  # BigQuery's URIs take `*` for a wildcard too
    if not args.prefix.startswith("gs://") and not args.local_uris:
        raise UsageError("BigQuery reads external tables from gs:// only; give the gs:// --output of "
                         "`fleetgrade run` (or --local-uris to print the DDL anyway)", args.prefix)
    try:
        sys.stdout.write(all_ddl(args.prefix, args.dataset))
    except UnmappedTypeError as exc:  # a schema this build cannot map: ours, not the user's
        raise Failure(str(exc)) from exc
    return 0
