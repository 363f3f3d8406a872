"""What the commands print, escaped (graders/runs/console.py): logs, report lines, error lines.

Every log record of every command goes through :class:`EscapingFormatter`, so a file name, an
identity or a message from an artifact is one line of printable text whichever module logs it;
:func:`shown_rows` does the same for the rows a command prints as a table.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from graders.runs.console import printable, printable_json

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class EscapingFormatter(logging.Formatter):
    """A log line with its message escaped; a traceback escaped line by line (its own line
    breaks kept, an exception message's forged ones not)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return printable(super().formatMessage(record))

    def formatException(self, ei: Any) -> str:
        return "\n".join(printable(line) for line in super().formatException(ei).split("\n"))

    def formatStack(self, stack_info: str) -> str:
        return "\n".join(printable(line) for line in super().formatStack(stack_info).split("\n"))


def configure_logging(level: str | int = logging.WARNING) -> None:
    """The root logger writes escaped lines to stderr at ``level`` (every command; ``run`` and
    ``regrade`` set their ``--log-level``); called again, it replaces its own handler only."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h.formatter, EscapingFormatter)]:
        root.removeHandler(old)
    handler = logging.StreamHandler()
    handler.setFormatter(EscapingFormatter(LOG_FORMAT))
    root.addHandler(handler)
    root.setLevel(level)


@contextmanager
def command_logging() -> Iterator[None]:
    """A command's logging (:func:`configure_logging`), and the root logger as it was once the
    command returns: ``main()`` called twice in one process (tests) leaves no level behind."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    configure_logging()
    try:
        yield
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
        for handler in handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(level)


def printable_lines(text: str) -> str:
    """Text laid out in lines by our own code (a rendered table), each line escaped."""
    return "\n".join(printable(line) for line in text.split("\n"))


def json_text(doc: Any) -> str:
    """``doc`` as the indented JSON a command prints (``sql``, ``check --json``, ``regrade --json``),
    nothing in it a terminal obeys and every value as stored."""
    import orjson

    return printable_json(orjson.dumps(doc, default=str, option=orjson.OPT_INDENT_2).decode()) + "\n"


def shown_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows to print: their text escaped (the rows themselves, as stored, are unchanged)."""
    return [{k: printable(v) if isinstance(v, str) else v for k, v in row.items()} for row in rows]
