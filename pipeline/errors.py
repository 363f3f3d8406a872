"""The exception a command raises to end with one line, and the exit statuses of every command.

``main()`` catches :class:`UsageError` (and its kinds) and prints :func:`one_line`; anything else
is a bug and may still show a traceback. The statuses (docs/command-line.md, "Exit status"):

- 2: a usage or input mistake: the command line, or a file or folder it names (argparse's own);
- 1: a failure while running (a full disk, a lock lost at commit, a table that cannot be read);
- 75: another job holds the output's lock (``EX_TEMPFAIL``: try again later);
- 130: interrupted (Ctrl-C), ``pipeline.interrupts``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from graders.runs.console import printable
from transforms.output_lock import LOCKED_EXIT

__all__ = ["FAILURE_EXIT", "LOCKED_EXIT", "USAGE_EXIT", "Failure", "InputError", "UsageError", "closest",
           "literal_path", "one_line", "query_error"]

USAGE_EXIT = 2
FAILURE_EXIT = 1


class UsageError(Exception):
    """A user's mistake: ``what`` went wrong, ``where`` (a path, flag or file) when known."""

    def __init__(self, what: str, where: str | None = None, *, exit_code: int = USAGE_EXIT) -> None:
        super().__init__(what)
        self.what = what
        self.where = where
        self.exit_code = exit_code

    def __str__(self) -> str:
        return f"{self.what} ({self.where})" if self.where else self.what


class InputError(UsageError):
    """A command's input cannot be used (unreadable, not JSON, not a run): an input mistake, exit 2."""


class Failure(UsageError):
    """The command failed while running, for a reason it names in one line: exit 1."""

    def __init__(self, what: str, where: str | None = None) -> None:
        super().__init__(what, where, exit_code=FAILURE_EXIT)


def query_error(exc: Exception, where: str | None = None) -> UsageError:
    """A DuckDB error as the one line it ends with: a query that is wrong (it does not parse, names
    what is not there, converts what cannot be) is a usage mistake; reading or memory failing, a
    failure while running."""
    import duckdb  # only commands that query import DuckDB

    what = " ".join(str(exc).split())
    if isinstance(exc, (duckdb.ProgrammingError, duckdb.DataError, duckdb.NotSupportedError, duckdb.IntegrityError)):
        return UsageError(what, where)
    return Failure(what, where)


def closest(name: str, known: Iterable[str], kind: str) -> str:
    """``; did you mean x?`` for the closest of ``known``, else ``; the <kind> are …`` (at most ten)."""
    names = sorted(set(known))
    close = difflib.get_close_matches(name, names, n=1)
    if close:
        return f"; did you mean {close[0]}?"
    if not names:
        return f"; there are no {kind}"
    return f"; the {kind} are {', '.join(names[:10])}{', …' if len(names) > 10 else ''}"


def one_line(command: str | None, what: str, where: str | None = None) -> str:
    """``fleetgrade <command>: <what> (<where>)`` on a single line, nothing in it a terminal obeys."""
    prefix = f"fleetgrade {command}" if command else "fleetgrade"
    text = f"{what} ({where})" if where else what
    return printable(f"{prefix}: {' '.join(text.split())}")


# What Beam's FileSystems (match, delete) and DuckDB's read_parquet take for a pattern.
GLOB_CHARACTERS = "*?[]"


def literal_path(path: str, flag: str) -> str:
    """``path`` if no reader would take it for a pattern; else a UsageError naming it. The output
    is read and deleted through globs built on it (`o[1]` matches `o1`, `o-*` every `o-…`), so a
    path holding a glob character is refused, local or gs://, rather than escaped for each reader."""
    bad = next((c for c in path if c in GLOB_CHARACTERS), None)
    if bad is not None:
        raise UsageError(f"{flag} holds {bad!r}, which Beam's file systems and DuckDB read as a pattern "
                         "(it would match other folders); use a path without * ? [ ]", path)
    return path
