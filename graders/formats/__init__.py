"""The input-format seam: one reader per agent-session / trace format (issue 31, docs/formats.md).

A reader turns one file (plus the files it names, such as a Claude Code session's subagent
transcripts) into :class:`~graders.formats.session.Session` objects: identity read from the file,
a gh-aw-shaped trace dict the built-in graders grade with their unchanged formulas, and the
trace-rules ``Run``. gh-aw artifact folders are the ``gh-aw`` format: they keep going through
``graders.formats.ghaw.preprocess`` exactly as before (graders/formats/ghaw/reader.py).

Readers live in the one plugin registry (graders/grading/registry.py), kind ``input_format``:
a reader module decorates its class with ``@input_format("<kind>")`` and the catalog
(graders/families/catalog.py) imports the module (docs/formats.md, "How to add a format").
"""

from __future__ import annotations

from typing import Protocol, cast

from graders.formats.session import FormatError, Session, Source
from graders.grading.registry import REGISTRY

__all__ = ["Format", "FormatError", "Session", "Source", "formats", "get_format", "read_file", "sniff"]

# How many leading bytes a sniffer sees: enough for the first record of every format seen.
SNIFF_BYTES = 64 * 1024


class Format(Protocol):
    """One input format. ``kind`` is its registry name and what ``runs.source_kind`` says."""

    kind: str
    folder: bool  # sniffed on a folder's listing (gh-aw), not on one file

    def sniff(self, name: str, head: bytes) -> bool:
        """Whether a file called ``name`` (its path, POSIX) starting with ``head`` is this format."""

    def read(self, source: Source) -> list[Session]:
        """The sessions of one file; raises :class:`FormatError` (naming the file) when it cannot."""


def formats() -> list[Format]:
    """Every registered input format, in registration order (readers are stateless: a fresh
    instance each time costs nothing and keeps the registry the one place that holds them)."""
    return [cast(Format, REGISTRY.create("input_format", name)) for name in REGISTRY.names("input_format")]


def get_format(kind: str) -> Format:
    """The input format registered as ``kind``; ``PluginError`` when there is none."""
    return cast(Format, REGISTRY.create("input_format", kind))


def sniff(name: str, head: bytes) -> Format | None:
    """The first registered file format that recognises the file, or None. Sniffing is
    unambiguous (tests/graders/formats check no sample is claimed twice), so order does not matter."""
    for fmt in formats():
        if not fmt.folder and fmt.sniff(name, head):
            return fmt
    return None


def read_file(source: Source) -> list[Session]:
    """The sessions of one file, whatever its format; :class:`FormatError` when none reads it."""
    fmt = sniff(source.name, source.head(SNIFF_BYTES))
    if fmt is None:
        raise FormatError(f"{source.name}: not a recognised agent session or trace format "
                          f"(tried {', '.join(sorted(f.kind for f in formats() if not f.folder))})")
    sessions = [s.finish() for s in fmt.read(source)]
    if not sessions:
        raise FormatError(f"{source.name}: a {fmt.kind} file with no session in it")
    return sessions
