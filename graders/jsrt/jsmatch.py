"""Matching user-supplied JavaScript regexes without letting one pattern hang the job.

``jsregex.compile_js_regex`` decides validity and gives the Python ``re`` translation, but
``re`` backtracks: ``(a+)+$`` against forty ``a`` and a ``!`` never ends. A :class:`JsMatcher`
runs the translation on RE2 (linear time, no backtracking) whenever it can be expressed there,
which is every pattern without backreferences or lookaround and every subject without lone
surrogate code units (RE2 reads UTF-8). Anything else runs on the ``regex`` module, which is
``re``-compatible and takes a timeout; a search past its budget raises :class:`JsRegexTimeout`,
which ends that grader with an error rather than the job.

Both engines answer "is there a match" exactly as ``re`` would for the same translation: RE2
gets the same pattern with a few spellings changed (``\\uXXXX`` to ``\\x{XXXX}``, ``\\Z`` to
``\\z``, the translator's word-boundary and negated-class lookaround forms to ``\\b`` and
``[^…]``), and a property test holds the equivalence.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Final

from graders.jsrt.jsregex import _WORD_BOUNDARY, compile_js_regex

DEFAULT_BUDGET_S: Final = 2.0
_NEGATED_CLASS: Final = re.compile(r"\(\?:\(\?!\[([^\]\[]*)\]\)\[\\s\\S\]\)")
_ESCAPE: Final = re.compile(r"\\(u([0-9a-fA-F]{4})|Z|.)", re.S)
# Lookaround, conditionals, backreferences and the never-matching ``(?!)``: not RE2.
_NOT_RE2: Final = re.compile(r"\(\?(?:[=!(]|<[=!])|\\[1-9]")


class JsRegexTimeout(RuntimeError):
    """A backtracking match ran past its time budget."""


def to_re2(translated: str) -> str | None:
    """The RE2 spelling of a ``translate_js_regex`` result, or None when RE2 cannot express it."""
    # Not ``\B``: RE2 reads UTF-8 and finds "no boundary" between the bytes of one non-ASCII
    # character ('1É1'), so a negated boundary stays lookaround and runs on the budgeted engine.
    text = translated.replace(_WORD_BOUNDARY, r"\b")
    text = _NEGATED_CLASS.sub(lambda m: f"[^{m.group(1)}]", text)
    if _NOT_RE2.search(text):
        return None
    surrogate = False

    def escape(m: re.Match[str]) -> str:
        nonlocal surrogate
        if m.group(2) is not None:
            code = int(m.group(2), 16)
            surrogate = surrogate or 0xD800 <= code <= 0xDFFF
            return f"\\x{{{code:04X}}}"
        return r"\z" if m.group(1) == "Z" else m.group(0)

    text = _ESCAPE.sub(escape, text)
    return None if surrogate else text


def _re2_compile(pattern: str) -> Any | None:
    import re2  # type: ignore[import-untyped]  # lazy: loads RE2 only where patterns are matched

    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error:
        return None  # e.g. a repetition above RE2's 1000: the budgeted engine takes it


@dataclass(frozen=True)
class JsMatcher:
    """``new RegExp(source, flags).test(text)`` over ``utf16_units`` text, bounded in time."""

    source: str
    translated: str
    linear: Any | None  # an RE2 pattern, when the translation has an RE2 spelling
    backtracking: Any  # a ``regex`` pattern (same syntax and meaning as ``re``)

    def search(self, text: str, budget_s: float = DEFAULT_BUDGET_S) -> bool:
        """Whether the pattern matches anywhere in ``text``; raises :class:`JsRegexTimeout`."""
        if self.linear is not None:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                pass  # lone surrogates: RE2 reads UTF-8 only
            else:
                return self.linear.search(text) is not None
        try:
            return self.backtracking.search(text, timeout=max(budget_s, 0.001)) is not None
        except TimeoutError as exc:
            raise JsRegexTimeout(self.source) from exc


_CACHE: dict[tuple[str, str], JsMatcher] = {}


def compile_js_matcher(source: str, flags: str = "") -> JsMatcher:
    """Compile like ``compile_js_regex`` (same JsRegexError for invalid patterns), for bounded matching."""
    key = (source, flags)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    import regex  # type: ignore[import-untyped]

    translated = compile_js_regex(source, flags).pattern
    re2_pattern = to_re2(translated)
    matcher = JsMatcher(source, translated, _re2_compile(re2_pattern) if re2_pattern is not None else None,
                        regex.compile(translated))
    if len(_CACHE) < 4096:
        _CACHE[key] = matcher
    return matcher


class Budget:
    """A time budget shared by the searches of one grader evaluation."""

    def __init__(self, seconds: float | None = None) -> None:
        self.seconds = DEFAULT_BUDGET_S if seconds is None else seconds
        self.deadline = time.monotonic() + self.seconds

    def search(self, matcher: JsMatcher, text: str) -> bool:
        try:
            return matcher.search(text, self.deadline - time.monotonic())
        except JsRegexTimeout as exc:
            raise JsRegexTimeout(
                f"pattern /{matcher.source}/ ran past the {self.seconds:g}s matching budget "
                "(a backtracking pattern: backreferences or lookaround)"
            ) from exc
