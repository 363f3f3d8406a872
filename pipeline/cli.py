"""The ``fleetgrade`` command line.

Each subcommand lives in its own ``pipeline/cmd_*.py`` module exposing
``register(subparsers)``; the handler it sets as ``func`` returns the exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from schemas.version import FLEETGRADE_VERSION

# Order = order in `fleetgrade --help`.
COMMAND_MODULES: tuple[str, ...] = (
    "pipeline.cmd_run",
    "pipeline.cmd_regrade",
    "pipeline.cmd_grade",
    "pipeline.cmd_trace",
    "pipeline.cmd_sql",
    "pipeline.cmd_report",
    "pipeline.cmd_bigquery",
    "pipeline.cmd_synth",
    "pipeline.cmd_check",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fleetgrade",
        description="Grade every run of a fleet of AI-agent workflows, deterministically, on Apache Beam.",
    )
    parser.add_argument("--version", action="version", version=f"fleetgrade {FLEETGRADE_VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    if extra and not getattr(args, "accepts_extra", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
