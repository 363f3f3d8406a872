"""The input-format seam: one reader per agent-session / trace format (issue 31, docs/formats.md).

A reader turns one file (plus the files it names, such as a Claude Code session's subagent
transcripts) into :class:`~graders.formats.session.Session` objects: identity read from the file,
a gh-aw-shaped trace dict the built-in graders grade with their unchanged formulas, and the
trace-rules ``Run``. gh-aw artifact folders are the ``gh-aw`` format: they keep going through
``graders.preprocess`` exactly as before (graders/formats/ghaw.py).

Adding a format is one module that defines a :class:`Format` and registers it with
:func:`register`, plus its import at the bottom of this file (docs/formats.md, "How to add a format").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from graders.formats.session import FormatError, Session, Source

__all__ = ["FORMATS", "Format", "FormatError", "Session", "Source", "read_file", "register", "sniff"]

# How many leading bytes a sniffer sees: enough for the first record of every format seen.
SNIFF_BYTES = 64 * 1024


class Format(Protocol):
    """One input format. ``kind`` is what ``runs.source_kind`` says for its runs."""

    kind: str
    folder: bool  # sniffed on a folder's listing (gh-aw), not on one file

    def sniff(self, name: str, head: bytes) -> bool:
        """Whether a file called ``name`` (its path, POSIX) starting with ``head`` is this format."""

    def read(self, source: Source) -> list[Session]:
        """The sessions of one file; raises :class:`FormatError` (naming the file) when it cannot."""


# The registry: kind -> format.
FORMATS: dict[str, Format] = {}

F = TypeVar("F", bound=Callable[[], Format])


def register(factory: F) -> F:
    """Class decorator: register one instance of a format under its ``kind``."""
    fmt = factory()
    if fmt.kind in FORMATS:
        raise ValueError(f"input format {fmt.kind!r} registered twice")
    FORMATS[fmt.kind] = fmt
    return factory


def sniff(name: str, head: bytes) -> Format | None:
    """The first registered file format that recognises the file, or None."""
    for fmt in FORMATS.values():
        if not fmt.folder and fmt.sniff(name, head):
            return fmt
    return None


def read_file(source: Source) -> list[Session]:
    """The sessions of one file, whatever its format; :class:`FormatError` when none reads it."""
    fmt = sniff(source.name, source.data[:SNIFF_BYTES])
    if fmt is None:
        raise FormatError(f"{source.name}: not a recognised agent session or trace format "
                          f"(tried {', '.join(k for k, f in FORMATS.items() if not f.folder)})")
    sessions = fmt.read(source)
    if not sessions:
        raise FormatError(f"{source.name}: a {fmt.kind} file with no session in it")
    return sessions


# Each module registers its format on import. Sniffing is unambiguous (the formats' first records
# differ; tests/graders/formats check no sample is claimed twice), so the order is only the imports'.
from graders.formats import aw_session as _aw_session  # noqa: E402
from graders.formats import claude_code as _claude_code  # noqa: E402
from graders.formats import copilot as _copilot  # noqa: E402
from graders.formats import ghaw as _ghaw  # noqa: E402
from graders.formats import hooks as _hooks  # noqa: E402
from graders.formats import otlp as _otlp  # noqa: E402

del _aw_session, _otlp, _copilot, _claude_code, _hooks, _ghaw
