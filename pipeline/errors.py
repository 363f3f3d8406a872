"""The one exception a command raises for a user's mistake, and the one line it becomes.

``main()`` catches :class:`UsageError` and prints :func:`one_line`; anything else is a bug and
may still show a traceback.
"""

from __future__ import annotations

from graders.runs.console import printable

# Exit status of a usage mistake (argparse's own, so every mistake exits alike).
USAGE_EXIT = 2


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
    """A command's input cannot be used (unreadable, not JSON, not a run): exit 1, not 2."""

    def __init__(self, what: str, where: str | None = None) -> None:
        super().__init__(what, where, exit_code=1)


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
