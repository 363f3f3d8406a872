"""The one configuration error type, and Go's ``%q``/``%T`` formatting for exact gh-aw messages."""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any


class GradersConfigError(ValueError):
    """A bad ``graders:`` configuration. ``str(exc)`` is gh-aw's message, verbatim; ``hint`` is
    fleetgrade's addition to it (a "did you mean", the ids one may configure), shown by the CLI."""

    def __init__(self, message: str, path: str | None = None, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.path = path  # the file that holds the bad configuration, when known
        self.hint = hint

    def __str__(self) -> str:
        return self.message

    def describe(self) -> str:
        """The message with its hint, prefixed with the file, for CLI output."""
        text = f"{self.message}{self.hint}"
        return f"{self.path}: {text}" if self.path else text


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``; did you mean "x"?`` for the closest of ``known``, or nothing."""
    close = difflib.get_close_matches(name, sorted(set(known)), n=1, cutoff=0.75)
    return f"; did you mean {go_quote(close[0])}?" if close else ""


def unknown_keys(found: Iterable[Any], allowed: Sequence[str], where: str) -> None:
    """gh-aw's frontmatter schema admits only ``allowed`` here: the first other key is an error."""
    for key in found:
        name = go_key(key)
        if name not in allowed:
            raise GradersConfigError(f"{where} has an unknown field {go_quote(name)}{did_you_mean(name, allowed)} "
                                     f"(the fields are {', '.join(allowed)})")


_GO_ESCAPES = {"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r", "\t": r"\t", "\v": r"\v",
               "\\": "\\\\", '"': '\\"'}
# Go's unicode.IsSpace (strings.TrimSpace); narrower than Python's str.strip().
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
            "\u2028\u2029\u202f\u205f\u3000"


def go_trim(text: str) -> str:
    return text.strip(_GO_SPACE)


def _go_printable(ch: str) -> bool:
    # unicode.IsPrint: letters, marks, numbers, punctuation, symbols and the ASCII space.
    return ch == " " or unicodedata.category(ch)[0] in "LMNPS"


def go_quote(text: str) -> str:
    """``strconv.Quote`` (Go's ``%q`` for a string)."""
    out = ['"']
    for ch in text:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif _go_printable(ch):
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def go_type(value: Any) -> str:
    """Go's ``%T`` of a value decoded from YAML into ``map[string]any``.

    gh-aw's YAML library decodes non-negative integers as uint64 and negative ones as int64.
    """
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "uint64" if value >= 0 else "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "[]interface {}"
    if isinstance(value, dict):
        return "map[string]interface {}"
    return type(value).__name__


def go_key(key: Any) -> str:
    """A YAML mapping key as the Go decoder stringifies it."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return ""
    if isinstance(key, float) and key.is_integer():
        return str(int(key))
    return str(key)
