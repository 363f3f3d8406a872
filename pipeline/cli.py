"""The ``fleetgrade`` command line.

Each subcommand lives in its own ``pipeline/cmd_*.py`` module exposing
``register(subparsers)``; the handler it sets as ``func`` returns the exit code.

Start-up stays light: only the module of the command being run is imported (``fleetgrade
--help`` imports none), and no parser needs Apache Beam. A user's mistake (a
:class:`~pipeline.errors.UsageError`, an argparse error, an unknown flag) ends as one line
``fleetgrade <command>: <what> (<where>)`` and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import importlib
import os
import sys
from collections.abc import Iterable, Sequence
from typing import NoReturn

from pipeline.beam_flags import beam_option_strings, split_beam_flags
from pipeline.console import command_logging
from pipeline.errors import FAILURE_EXIT, USAGE_EXIT, UsageError, closest, one_line
from pipeline.interrupts import INTERRUPTED_EXIT, Interrupts
from schemas.version import FLEETGRADE_VERSION

# (command, module that registers it, the one-line help of `fleetgrade --help`), in --help order.
# The help is repeated here so that listing the commands imports none of them
# (tests/pipeline/test_cli_startup.py checks it matches each module's own).
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("run", "pipeline.cmd_run", "grade every run under --input and write Parquet tables under --output"),
    ("regrade", "pipeline.cmd_regrade",
     "regrade runs' archived operational-value evaluators at an evidence time (observations table)"),
    ("grade", "pipeline.cmd_grade",
     "grade one run folder (or a preprocessed trace) and write gh-aw's grader files"),
    ("preprocess", "pipeline.cmd_grade", "print a run's preprocessed trace (grader_payload.json) as JSON"),
    ("trace", "pipeline.cmd_trace",
     "grade agent trajectories with path rules and pass^k (trace-grader compatible)"),
    ("sql", "pipeline.cmd_sql", "run a DuckDB query over the output tables (one view per table)"),
    ("report", "pipeline.cmd_report",
     "write a static HTML report (regressions, pass rates, distributions, worst runs, …)"),
    ("bigquery-ddl", "pipeline.cmd_bigquery", "print CREATE EXTERNAL TABLE statements for the output tables"),
    ("synth", "pipeline.cmd_synth", "write a deterministic synthetic fleet (a checkout's python -m tools.synth)"),
    ("check", "pipeline.cmd_check",
     "exit 1 when a workflow's grades regressed (the table regressions; a CI gate after `run`)"),
)
COMMAND_MODULES: tuple[str, ...] = tuple(dict.fromkeys(module for _, module, _ in COMMANDS))
# Commands that pass Beam's own flags (--project, --temp_location, …) through to the pipeline.
BEAM_COMMANDS = frozenset({"run", "regrade"})
# 128 + SIGPIPE: what a Unix tool killed by a closed pipe exits with.
BROKEN_PIPE_EXIT = 141


class Parser(argparse.ArgumentParser):
    """No abbreviations (``--ful`` is not ``--full``), and errors raise instead of exiting."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line (top-level options take no values)."""
    for token in argv:
        if token == "--":
            return None
        if not token.startswith("-"):
            return token
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The full parser of ``command``'s module; every other command is listed by name only."""
    parser = Parser(
        prog="fleetgrade",
        description="Grade every run of a fleet of AI-agent workflows, deterministically, on Apache Beam.",
    )
    parser.add_argument("--version", action="version", version=f"fleetgrade {FLEETGRADE_VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = next((module for name, module, _ in COMMANDS if name == command), None)
    for name, module, help_text in COMMANDS:
        if module == wanted:
            importlib.import_module(module).register(sub)
            wanted = None  # a module registers all its commands at once
        elif name not in sub.choices:
            sub.add_parser(name, help=help_text, add_help=False)
    return parser


def unknown_argument(tokens: Sequence[str], known: Iterable[str]) -> UsageError:
    """The first unknown token, with the closest known flag where one is close."""
    flag = next((t for t in tokens if t.startswith("-")), None)
    if flag is None:
        return UsageError(f"unexpected argument {tokens[0]!r}")
    name = flag.split("=", 1)[0]
    close = difflib.get_close_matches(name, sorted(set(known)), n=1, cutoff=0.75)
    hint = f"; did you mean {close[0]}?" if close else ""
    return UsageError(f"unknown flag {name}{hint}")


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    return [s for action in parser._actions for s in action.option_strings]


def _parse(argv: list[str], command: str | None) -> argparse.Namespace:
    parser = build_parser(command)
    names = [name for name, _, _ in COMMANDS]
    if command is not None and command not in names:
        raise UsageError(f"unknown command {command!r}{closest(command, names, 'commands')}")
    tokens: list[str] = argv
    beam_flags: list[str] = []
    known = _option_strings(parser)
    if command is not None:
        known += _option_strings(_subparser(parser, command))
    # Beam's flags are looked up (importing Beam) only when a flag is not one of ours.
    if command in BEAM_COMMANDS and any(_flag_name(t) not in known for t in argv if t.startswith("--")):
        # Ours win where the names overlap (--runner); the rest of Beam's pass through.
        tokens, beam_flags = split_beam_flags(argv, known)
        known += beam_option_strings()
    try:
        args, extra = parser.parse_known_args(tokens)
    except UsageError:
        # A misspelt required flag (--inptu) is the mistake to name, not the flag it left missing.
        typos = [t for t in tokens if t.startswith("--") and _flag_name(t) not in known]
        if typos:
            raise unknown_argument(typos, known) from None
        raise
    if extra:
        raise unknown_argument(extra, known)
    args.extra = beam_flags
    return args


def _flag_name(token: str) -> str:
    return token.split("=", 1)[0]


def _subparser(parser: argparse.ArgumentParser, command: str | None) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            sub: argparse.ArgumentParser = action.choices[command]
            return sub
    return parser


def _quiet_stdout() -> None:
    """After a reader closed the pipe: later writes (and the flush at exit) go nowhere."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (captured in a test)
        pass


# OSErrors about the user's paths (a usage mistake, 2) or the machine (a failure while running, 1).
_PATH_ERRNOS = frozenset({errno.ENOENT, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EISDIR, errno.EEXIST,
                          errno.ENAMETOOLONG})
_MACHINE_ERRNOS = frozenset({errno.ENOSPC, errno.EROFS, errno.EDQUOT})


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = command_of(argv)
    with command_logging():  # warnings of every command, escaped (`run` sets its --log-level)
        return _interruptible(argv, command)


def _interruptible(argv: list[str], command: str | None) -> int:
    with Interrupts(relay=command in BEAM_COMMANDS) as interrupts:
        try:
            code = _command(argv, command)
        except BaseException:
            if not interrupts.caught:
                raise
            code = INTERRUPTED_EXIT  # however the interrupt came back (Beam's RuntimeError, …)
        if interrupts.caught or code == INTERRUPTED_EXIT:
            interrupts.say(one_line(command, "interrupted"))
            return INTERRUPTED_EXIT
    return code


def _command(argv: list[str], command: str | None) -> int:
    try:
        args = _parse(argv, command)
        if not getattr(args, "func", None):
            if command is not None:  # a command listed by name only never runs
                raise UsageError(f"no handler for {command!r}")
            build_parser().print_help(sys.stderr)
            return USAGE_EXIT
        code: int = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except UsageError as exc:
        print(one_line(command, exc.what, exc.where), file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        _quiet_stdout()
        return BROKEN_PIPE_EXIT
    except OSError as exc:
        if exc.errno not in _PATH_ERRNOS | _MACHINE_ERRNOS or not exc.filename:
            raise
        print(one_line(command, exc.strerror or str(exc), str(exc.filename)), file=sys.stderr)
        return FAILURE_EXIT if exc.errno in _MACHINE_ERRNOS else USAGE_EXIT
    except KeyboardInterrupt:
        return INTERRUPTED_EXIT


if __name__ == "__main__":
    sys.exit(main())
