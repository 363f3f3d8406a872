"""Text from an artifact as a console shows it: the one escaping every console writer uses.

File names, identities, tool names and messages come from files an agent wrote; printed raw, an
escape sequence in one retitles the terminal or clears the screen, and a newline forges a whole
log line. Logs (``pipeline/console.py``'s formatter), ``trace``, ``check``, ``report`` and error
lines show them through :func:`printable`; JSON output through :func:`printable_json`, which
keeps every value as stored.
"""

from __future__ import annotations

import re
from typing import Any, Final

# C0 and C1 controls and DEL; line and paragraph separators; the bidirectional controls that
# reorder what a line shows ("Trojan Source"); lone surrogates (bytes of a name that is not UTF-8).
_UNSAFE: Final = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


# What JSON leaves raw inside its strings (C0 controls it escapes itself) that a terminal obeys.
_JSON_UNSAFE: Final = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8, as os.fsdecode keeps it
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character as ``\\xNN`` (``\\uNNNN`` past U+00FF): one line,
    nothing a terminal obeys. Printable text, Unicode included, is unchanged."""
    if _UNSAFE.search(text) is None:  # the common case, in C
        return text
    return _UNSAFE.sub(_escape, text)


def printable_json(text: str) -> str:
    """JSON text with what JSON leaves raw and a terminal obeys (DEL, C1 and bidirectional
    controls, line separators) as ``\\uNNNN`` escapes: the same values once parsed. Those
    characters occur only inside strings, where any character may be so escaped."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def for_terminal(text: str, stream: Any) -> str:
    """JSON text for ``stream``: :func:`printable_json` when it is a terminal; unchanged into a
    file or a pipe, which get the reference's bytes (``grade``, ``preprocess``, ``trace --json``)."""
    try:
        tty = bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or stream-like object without a descriptor
        tty = False
    return printable_json(text) if tty else text
