"""JavaScript value semantics, in one place.

The reference graders are JavaScript; their numbers come from ``Number(x) || 0``, their
keys from ``JSON.stringify`` and their messages from ``String(v)``. Reproducing those
conversions exactly is what makes our values and messages agree, so every grader uses
these helpers instead of Python's own conversions.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Final

import orjson

from graders.jsrt.lazyjson import LazyList

# JSON arrays: lists, and the trace's lazy sequences (graders/jsrt/lazyjson.py).
_ARRAYS: Final = (list, LazyList)

__all__ = [
    "UNDEFINED",
    "JsRegexError",
    "compile_js_regex",
    "is_record",
    "is_safe_integer",
    "js_get",
    "js_join",
    "js_number",
    "js_number_or_zero",
    "js_number_to_string",
    "js_sort_key",
    "js_string",
    "js_stringify",
    "js_to_fixed",
    "js_trim",
    "js_truthy",
    "stable_stringify",
    "translate_js_regex",
    "utf16_len",
    "utf16_slice",
    "utf16_units",
]


class _Undefined:
    """JavaScript ``undefined``: distinct from ``None`` (JSON ``null``)."""

    _instance: _Undefined | None = None

    def __new__(cls) -> _Undefined:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNDEFINED"

    def __bool__(self) -> bool:
        return False


UNDEFINED: Final = _Undefined()

# ECMAScript WhiteSpace + LineTerminator (what String.prototype.trim removes).
_JS_WS = (
    "\u0009\u000a\u000b\u000c\u000d\u0020\u00a0\u1680\u2000\u2001\u2002\u2003\u2004"
    "\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)

_DECIMAL = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|Infinity)\Z")
_RADIX = re.compile(r"0([xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)\Z")
_MAX_SAFE = 2**53


def is_record(value: Any) -> bool:
    """``v !== null && typeof v === "object" && !Array.isArray(v)``."""
    return isinstance(value, dict)


def js_get(obj: Any, key: str) -> Any:
    """Property read ``obj[key]`` with ``undefined`` for anything that has no such key.

    Raises TypeError for ``null``/``undefined`` receivers, as JavaScript does.
    """
    if obj is None or obj is UNDEFINED:
        raise TypeError(f"Cannot read properties of {js_string(obj)} (reading '{key}')")
    if isinstance(obj, dict):
        return obj.get(key, UNDEFINED)
    if isinstance(obj, (list, str)) and key == "length":
        return utf16_len(obj) if isinstance(obj, str) else len(obj)
    return UNDEFINED


def js_trim(text: str) -> str:
    return text.strip(_JS_WS)


def utf16_len(text: str) -> int:
    """``text.length`` in JavaScript (UTF-16 code units)."""
    if text.isascii():
        return len(text)
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def js_truthy(value: Any) -> bool:
    if value is None or value is UNDEFINED or value is False:
        return False
    if isinstance(value, bool):
        return True
    if isinstance(value, (int, float)):
        return not (value == 0 or (isinstance(value, float) and math.isnan(value)))
    if isinstance(value, str):
        return value != ""
    return True


def _string_to_number(text: str) -> float | int:
    s = js_trim(text)
    if s == "":
        return 0
    m = _RADIX.match(s)
    if m:
        body = m.group(1)
        base = {"x": 16, "o": 8, "b": 2}[body[0].lower()]
        return _int_to_js(int(body[1:], base))
    if _DECIMAL.match(s):
        if s.endswith("Infinity"):
            return -math.inf if s.startswith("-") else math.inf
        value = float(s)
        if value.is_integer() and abs(value) < _MAX_SAFE and "." not in s and "e" not in s.lower():
            return int(value)
        return value
    return math.nan


def _int_to_js(value: int) -> float | int:
    return value if abs(value) <= _MAX_SAFE else float(value)


def js_number(value: Any) -> float | int:
    """``Number(value)``."""
    if value is None:
        return 0
    if value is UNDEFINED:
        return math.nan
    if isinstance(value, bool):
        return 1 if value else 0
    if isinstance(value, int):
        return _int_to_js(value)
    if isinstance(value, float):
        return value
    if isinstance(value, str):
        return _string_to_number(value)
    if isinstance(value, _ARRAYS):
        return _string_to_number(js_string(value))
    return math.nan


def js_number_or_zero(value: Any) -> float | int:
    """``Number(value) || 0``: NaN and -0 become 0."""
    n = js_number(value)
    if n != n or n == 0:
        return 0
    return n


def js_number_to_string(value: float | int) -> str:
    """``Number.prototype.toString()`` (shortest round-trip digits, JS exponent rules)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if abs(value) < 10**21:
            return str(value)
        value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    r = repr(abs(value))
    mantissa, _, exp_part = r.partition("e")
    exp = int(exp_part) if exp_part else 0
    int_part, _, frac_part = mantissa.partition(".")
    if frac_part == "0":
        frac_part = ""
    digits = (int_part + frac_part).lstrip("0")
    # n: position of the decimal point relative to the digit string (ECMA-262 Number::toString).
    point = len(int_part) + exp
    if int_part == "0":
        stripped = frac_part.lstrip("0")
        point = exp - (len(frac_part) - len(stripped))
        digits = stripped
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    n = point
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    exp_str = ("+" if e >= 0 else "-") + str(abs(e))
    if k == 1:
        return sign + digits + "e" + exp_str
    return sign + digits[0] + "." + digits[1:] + "e" + exp_str


def js_string(value: Any) -> str:
    """``String(value)``."""
    if value is None:
        return "null"
    if value is UNDEFINED:
        return "undefined"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return js_number_to_string(value)
    if isinstance(value, str):
        return value
    if isinstance(value, _ARRAYS):
        return ",".join("" if v is None or v is UNDEFINED else js_string(v) for v in value)
    return "[object Object]"


def _is_array_index(key: str) -> bool:
    return key.isdigit() and (key == "0" or key[0] != "0") and int(key) < 2**32 - 1


def js_key_order(obj: dict[str, Any]) -> list[str]:
    """Own-property order of a JavaScript object: array indexes ascending, then insertion."""
    keys = list(obj.keys())
    if not any(k[:1].isdigit() for k in keys):
        return keys
    index_keys = sorted((k for k in keys if _is_array_index(k)), key=int)
    return index_keys + [k for k in keys if not _is_array_index(k)]


# What json.dumps(text, ensure_ascii=False) calls for a str, without building an encoder per
# call (it showed in the dedupe keys' profile).
_quote = json.encoder.encode_basestring  # type: ignore[attr-defined]


# For JSON data (what the parsers produce), orjson writes the same text as the functions
# below, several times faster (they run once per tool call of every run). It is used when the
# text provably matches: no float token (JavaScript formats numbers its own way), no key that
# is an array index (JavaScript puts those first) and, when keys are sorted, no character
# from U+E000 up (orjson sorts by code point, JavaScript by UTF-16 unit). A false alarm (such
# text inside a string) only sends the value down the exact path.
_FLOAT_TOKEN: Final = re.compile(rb"(?:^|[:,\[])-?\d+[.eE]")
_INDEX_KEY: Final = re.compile(rb'[{,]"(?:0|[1-9]\d*)":')
_SORT_UNSAFE: Final = re.compile(rb"[\xee-\xf4]")


# Where either pattern above can match: a digit before ".", "e" or "E", or before '":'. The
# patterns scan slowly (~2 µs on a short text, per call of every tool call), so the text is
# first mapped (digits to "0", the three float marks to ".", quotes and colons kept, all else
# to " ") and searched for "0." and '0":' in C; only a text that has one is scanned exactly.
_SHAPE: Final = bytes(
    0x30 if 0x30 <= i <= 0x39 else 0x2E if i in b".eE" else i if i in b'":' else 0x20 for i in range(256))


def _orjson_text(value: Any, sort_keys: bool) -> str | None:
    try:
        out = orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else 0)
    except (TypeError, orjson.JSONEncodeError):  # undefined, lone surrogates, big integers
        return None
    shape = out.translate(_SHAPE)
    if b"0." in shape and _FLOAT_TOKEN.search(out):
        return None
    if sort_keys:
        if not out.isascii() and _SORT_UNSAFE.search(out):
            return None
    elif b'0":' in shape and _INDEX_KEY.search(out):
        return None
    return out.decode()


def js_stringify(value: Any, indent: int = 0) -> str | None:
    """``JSON.stringify(value, null, indent)``; ``None`` when the result is undefined."""
    if value is UNDEFINED:
        return None
    if indent:
        return _stringify_pretty(value, " " * indent, "")
    text = _orjson_text(value, False) if isinstance(value, (dict, list)) else None
    if text is not None:
        return text
    try:
        return _stringify(value)
    except RecursionError:  # valid data nested deeper than the stack allows (orjson stops at 255)
        return _stringify_nested(value)


def _stringify_pretty(value: Any, step: str, current: str) -> str:
    if isinstance(value, _ARRAYS) and value:
        inner = current + step
        items = ["null" if v is UNDEFINED else _stringify_pretty(v, step, inner) for v in value]
        return "[\n" + inner + (",\n" + inner).join(items) + "\n" + current + "]"
    if isinstance(value, dict):
        inner = current + step
        parts = [
            _quote(k) + ": " + _stringify_pretty(value[k], step, inner)
            for k in js_key_order(value)
            if value[k] is not UNDEFINED
        ]
        if not parts:
            return "{}"
        return "{\n" + inner + (",\n" + inner).join(parts) + "\n" + current + "}"
    return _stringify(value)


def _stringify(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return "null"
        return js_number_to_string(value)
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, _ARRAYS):
        return "[" + ",".join("null" if v is UNDEFINED else _stringify(v) for v in value) + "]"
    if isinstance(value, dict):
        parts = []
        for k in js_key_order(value):
            v = value[k]
            if v is UNDEFINED:
                continue
            parts.append(_quote(k) + ":" + _stringify(v))
        return "{" + ",".join(parts) + "}"
    return "null"


def _stringify_nested(value: Any) -> str:
    """``_stringify`` with an explicit stack instead of recursion: the same text at any depth."""
    out: list[str] = []
    # Per open array or object: the (separator and key, value) pairs still to write, and its end.
    stack: list[tuple[Iterator[tuple[str, Any]], str]] = []

    def enter(prefix: str, v: Any) -> None:
        out.append(prefix)
        if isinstance(v, _ARRAYS):
            out.append("[")
            items = (("," if i else "", x) for i, x in enumerate(v))
            stack.append((items, "]"))
        elif isinstance(v, dict):
            out.append("{")
            keys = [k for k in js_key_order(v) if v[k] is not UNDEFINED]
            pairs = ((("," if i else "") + _quote(k) + ":", v[k]) for i, k in enumerate(keys))
            stack.append((pairs, "}"))
        else:
            out.append(_stringify(v))  # a scalar; undefined in an array is "null"

    enter("", value)
    while stack:
        pending, end = stack[-1]
        item = next(pending, None)
        if item is None:
            stack.pop()
            out.append(end)
        else:
            enter(*item)
    return "".join(out)


def js_sort_key(text: str) -> bytes:
    """Default ``Array.prototype.sort`` order for strings (UTF-16 code units)."""
    return text.encode("utf-16-be", "surrogatepass")


def stable_stringify(value: Any) -> str:
    """Key-sorted JSON used by gh-aw's dedupe keys (``undefined`` becomes "")."""
    if isinstance(value, (dict, list)):
        text = _orjson_text(value, True)
        if text is not None:
            return text
    return _stable_stringify(value)


def _stable_stringify(value: Any) -> str:
    # Exact-type fast paths first: this runs once per tool call of every run.
    t = type(value)
    if t is str:
        return _quote(value)
    if isinstance(value, dict):
        keys = list(value)
        # For ASCII keys code-point order is UTF-16 order; others need the UTF-16 sort key.
        if all(k.isascii() for k in keys):
            keys.sort()
        else:
            keys.sort(key=js_sort_key)
        return "{" + ",".join([_quote(k) + ":" + _stable_stringify(value[k]) for k in keys]) + "}"
    if t is int and -(10**21) < value < 10**21:
        return str(value)
    if value is UNDEFINED:
        return ""
    if isinstance(value, _ARRAYS):
        return "[" + ",".join([_stable_stringify(v) for v in value]) + "]"
    return _stringify(value)


def is_safe_integer(value: Any) -> bool:
    """``Number.isSafeInteger(value)``: a number (never a boolean) that is an integer within 2**53 - 1."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return False
    return abs(value) <= _MAX_SAFE - 1


def js_join(values: list[Any], sep: str = ",") -> str:
    """``Array.prototype.join``: ``null``/``undefined`` elements become empty strings."""
    return sep.join("" if v is None or v is UNDEFINED else js_string(v) for v in values)


def js_to_fixed(value: float | int, digits: int) -> str:
    """``Number.prototype.toFixed(digits)``.

    JavaScript rounds the exact binary value and picks the larger candidate on a tie, so
    exact halves round away from zero (0.625 -> "0.63") while 1.005 (really 1.00499...)
    gives "1.00"; Python's ``format`` would round half to even instead.
    """
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if abs(value) >= 1e21 or math.isinf(value):
            return js_number_to_string(value)
    elif abs(value) >= 10**21:
        return js_number_to_string(value)
    exact = Decimal(value)  # exact: Decimal(float) keeps every binary digit
    negative = exact < 0
    rounded = abs(exact).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    text = f"{rounded:f}"
    # (-0).toFixed(2) is "0.00", but -0.001.toFixed(2) is "-0.00" (x < 0 keeps the sign).
    return "-" + text if negative else text


# --- JavaScript regular expressions ------------------------------------------------------
#
# gh-aw compiles user patterns with ``new RegExp(pattern, "i")``: a non-unicode JavaScript
# regex with the Annex B (web-compatibility) grammar. Python's ``re`` differs in syntax and in
# meaning, so a pattern is parsed with the JavaScript grammar (deciding validity as JavaScript
# does) and re-emitted as an explicit Python pattern:
#
# - the pattern and the subject are both seen as UTF-16 code units (``utf16_units``): a
#   non-unicode JS regex matches code units, so "." matches half of an emoji;
# - every character and class is emitted explicitly: ``\d`` is [0-9] (Python's is Unicode),
#   ``\s`` is the JS whitespace set (Python's adds \x1c-\x1f and \x85), ``\w``/``\b`` are ASCII,
#   "." excludes \n \r \u2028 \u2029 (Python's only \n), ``$`` is the very end (Python's ``$``
#   also matches before a final newline), ``[^]`` is any character and ``[]`` nothing;
# - the "i" flag is applied by expanding each literal and range into its JS case-equivalents
#   (JS Canonicalize: simple upper-casing that never maps a non-ASCII character to ASCII),
#   not with re.IGNORECASE, whose Unicode folding also equates k/K (Kelvin), s/ſ, i/ı/İ, ß/ẞ;
# - Annex B leniency is reproduced: identity escapes (``\A`` is "A", ``\Z`` is "Z", ``\/``),
#   lone ``{``, ``}`` and ``]`` are literals, ``\8`` is "8", ``\12`` without 12 groups is an
#   octal escape, ``\c`` without a letter is a backslash, class ranges with a class escape
#   (``[\w-a]``) are unions, lookaheads may be quantified;
# - ``(?ims-ims:...)`` modifier groups (ES2025; the Node 24 that runs github-script accepts them)
#   scope the flags to their group;
# - JS errors stay errors: ``(?i)`` (flags without a group), ``(?P<...>``, ``(?#...)``,
#   ``(?>...)``, possessive ``a*+``, ``a**``, ``{2}`` with nothing to repeat, out-of-order
#   ranges and quantifier bounds, unterminated groups and classes, bad group names;
# - named groups ``(?<x>...)`` become numbered groups; a backreference to a group that has not
#   closed yet (forward or self reference) matches empty, as in JS, and one to a group that did
#   not participate matches empty through ``(?(n)...)``.
#
# Known limits, documented in docs/deviations-trajectory.md: under "i" a backreference uses
# Python's Unicode case folding (``(?i:\1)``); lookbehind must be fixed-width in Python, so a
# variable-width lookbehind raises JsRegexError ("untranslatable") and counts as invalid;
# quantifier bounds above 65535 are clamped to 65535 (exact for subjects shorter than that).


class JsRegexError(ValueError):
    """The pattern is not a valid JavaScript regex, or cannot be translated to Python."""


def utf16_units(text: str) -> str:
    """``text`` with each astral character split into its two surrogate code units."""
    if text.isascii() or all(ord(ch) <= 0xFFFF for ch in text):
        return text
    out = []
    for ch in text:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            out.append(chr(0xD800 + (cp >> 10)))
            out.append(chr(0xDC00 + (cp & 0x3FF)))
        else:
            out.append(ch)
    return "".join(out)


def utf16_slice(text: str, end: int) -> str:
    """``text.slice(0, end)`` in JS: counted in UTF-16 units, possibly splitting a pair.

    A split pair leaves a lone high surrogate, as in JavaScript; the result is a code-unit
    string (see ``utf16_units``) only when a pair was split.
    """
    if utf16_len(text) <= end:
        return text
    return utf16_units(text)[:end]


_REPEAT_CAP: Final = 65535
_LINE_TERMINATORS: Final = "\n\r\u2028\u2029"
_JS_SPACE: Final = "\t\n\v\f\r \u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff" + "".join(
    chr(c) for c in range(0x2000, 0x200B)
)
def _esc(ch: str) -> str:
    """One code unit as an unambiguous Python pattern escape."""
    if ch.isascii() and ch.isalnum():
        return ch
    return f"\\u{ord(ch):04x}"


def _set_items(chars: str) -> str:
    return "".join(_esc(c) for c in chars)


_ESCAPE_SETS: Final = {
    "d": "0-9",
    "w": "A-Za-z0-9_",
    "s": _set_items(_JS_SPACE),
}
_WB: Final = "[A-Za-z0-9_]"
_WORD_BOUNDARY: Final = f"(?:(?<={_WB})(?!{_WB})|(?<!{_WB})(?={_WB}))"
_NOT_WORD_BOUNDARY: Final = f"(?:(?<={_WB})(?={_WB})|(?<!{_WB})(?!{_WB}))"


def _canonicalize(cu: int) -> int:
    """JS Canonicalize(ch) for a non-unicode, ignoreCase regex."""
    upper = chr(cu).upper()
    if len(upper) != 1:
        return cu
    up = ord(upper)
    if cu >= 128 and up < 128:
        return cu
    return up


_CASE_GROUPS: dict[int, tuple[int, ...]] | None = None
_MULTI_GROUPS: list[tuple[int, ...]] = []


def _case_groups() -> dict[int, tuple[int, ...]]:
    """Code unit -> every code unit with the same canonical form (only for groups of 2+)."""
    global _CASE_GROUPS
    if _CASE_GROUPS is None:
        by_canon: dict[int, list[int]] = {}
        for cu in range(0x10000):
            by_canon.setdefault(_canonicalize(cu), []).append(cu)
        groups: dict[int, tuple[int, ...]] = {}
        for members in by_canon.values():
            if len(members) > 1:
                group = tuple(members)
                _MULTI_GROUPS.append(group)
                for m in members:
                    groups[m] = group
        _CASE_GROUPS = groups
    return _CASE_GROUPS


def _range_items(lo: int, hi: int, ignore_case: bool) -> str:
    items = _esc(chr(lo)) if lo == hi else f"{_esc(chr(lo))}-{_esc(chr(hi))}"
    if not ignore_case:
        return items
    groups = _case_groups()
    if lo == hi:
        extra = [m for m in groups.get(lo, ()) if m != lo]
    else:
        extra = sorted({m for g in _MULTI_GROUPS if any(lo <= m <= hi for m in g) for m in g if not lo <= m <= hi})
    return items + "".join(_esc(chr(m)) for m in extra)


class _JsRegexParser:
    """Recursive descent over the non-unicode (Annex B) JavaScript pattern grammar."""

    def __init__(self, source: str, flags: str) -> None:
        self.src = utf16_units(source)
        self.pos = 0
        self.ignore_case = "i" in flags
        self.multiline = "m" in flags
        self.dot_all = "s" in flags
        self.group_names: dict[str, int] = {}
        self.total_groups, self.has_named = self._scan_groups()
        self.opened = 0  # capturing groups opened so far
        self.closed: set[int] = set()

    def fail(self, why: str) -> JsRegexError:
        return JsRegexError(f"Invalid regular expression: /{self.src}/: {why}")

    def _scan_groups(self) -> tuple[int, bool]:
        count = 0
        named = False
        i, n, in_class = 0, len(self.src), False
        while i < n:
            ch = self.src[i]
            if ch == "\\":
                i += 2
                continue
            if in_class:
                in_class = ch != "]"
            elif ch == "[":
                in_class = True
            elif ch == "(":
                if not self.src.startswith("(?", i):
                    count += 1
                elif self.src.startswith("(?<", i) and self.src[i + 3 : i + 4] not in ("=", "!"):
                    count += 1
                    named = True
            i += 1
        return count, named

    def peek(self, k: int = 0) -> str:
        i = self.pos + k
        return self.src[i] if i < len(self.src) else ""

    def translate(self) -> str:
        out = self.disjunction()
        if self.pos < len(self.src):
            raise self.fail("Unmatched ')'" if self.peek() == ")" else "Unexpected character")
        return out

    def disjunction(self) -> str:
        parts = [self.alternative()]
        while self.peek() == "|":
            self.pos += 1
            parts.append(self.alternative())
        return "|".join(parts)

    def alternative(self) -> str:
        out = []
        while self.pos < len(self.src) and self.peek() not in ("|", ")"):
            out.append(self.term())
        return "".join(out)

    def _braced_quantifier(self) -> tuple[int, int | None, int] | None:
        """``{n}``, ``{n,}`` or ``{n,m}`` at pos: (min, max, length) or None if not one."""
        m = re.match(r"\{([0-9]+)(,([0-9]*))?\}", self.src[self.pos :])
        if not m:
            return None
        lo = int(m.group(1))
        hi: int | None = lo
        if m.group(2):
            hi = int(m.group(3)) if m.group(3) else None
        return lo, hi, m.end()

    def term(self) -> str:
        ch = self.peek()
        quantifiable = True
        if ch == "^":
            self.pos += 1
            atom = r"(?:(?<![\s\S])|(?<=[\n\r\u2028\u2029]))" if self.multiline else r"\A"
            quantifiable = False
        elif ch == "$":
            self.pos += 1
            atom = r"(?=[\n\r\u2028\u2029]|(?![\s\S]))" if self.multiline else r"\Z"
            quantifiable = False
        elif ch == "\\" and self.peek(1) in ("b", "B"):
            self.pos += 2
            atom = _WORD_BOUNDARY if ch and self.src[self.pos - 1] == "b" else _NOT_WORD_BOUNDARY
            quantifiable = False
        elif ch == "(":
            atom, quantifiable = self.group()
        else:
            atom = self.atom()
        return self.quantified(atom, quantifiable)

    def quantified(self, atom: str, quantifiable: bool) -> str:
        ch = self.peek()
        quant = ""
        if ch in ("*", "+", "?"):
            quant = ch
            self.pos += 1
        elif ch == "{":
            braced = self._braced_quantifier()
            if braced is not None:
                lo, hi, length = braced
                if hi is not None and lo > hi:
                    raise self.fail("numbers out of order in {} quantifier")
                self.pos += length
                lo_c = min(lo, _REPEAT_CAP)
                hi_c = None if hi is None else min(hi, _REPEAT_CAP)
                quant = f"{{{lo_c},{'' if hi_c is None else hi_c}}}"
        if not quant:
            return atom
        if not quantifiable:
            raise self.fail("Nothing to repeat")
        if self.peek() == "?":
            quant += "?"
            self.pos += 1
        nxt = self.peek()
        if nxt in ("*", "+", "?") or (nxt == "{" and self._braced_quantifier() is not None):
            raise self.fail("Nothing to repeat")
        return f"(?:{atom}){quant}"

    def group(self) -> tuple[str, bool]:
        src = self.src
        start = self.pos
        if src.startswith("(?:", start):
            self.pos += 3
            kind, quantifiable = "(?:", True
        elif src.startswith("(?=", start) or src.startswith("(?!", start):
            self.pos += 3
            kind, quantifiable = src[start : start + 3], True  # Annex B: lookaheads may be quantified
        elif src.startswith("(?<=", start) or src.startswith("(?<!", start):
            self.pos += 4
            kind, quantifiable = src[start : start + 4], False
        elif src.startswith("(?<", start):
            self.pos += 3
            name = self.group_name()
            if name in self.group_names:
                raise self.fail("Duplicate capture group name")
            self.opened += 1
            self.group_names[name] = self.opened
            kind, quantifiable = "(", True
        elif src.startswith("(?", start):
            return self.modifier_group()
        else:
            self.pos += 1
            self.opened += 1
            kind, quantifiable = "(", True
        number = self.opened if kind == "(" else None
        body = self.disjunction()
        if self.peek() != ")":
            raise self.fail("Unterminated group")
        self.pos += 1
        if number is not None:
            self.closed.add(number)
        return f"{kind}{body})", quantifiable

    def modifier_group(self) -> tuple[str, bool]:
        """``(?ims-ims:...)``: flags scoped to the group (ES2025 modifiers, V8 12.5+)."""
        m = re.match(r"\(\?([a-z]*)(?:-([a-z]*))?:", self.src[self.pos :])
        if not m:
            raise self.fail("Invalid group")
        add, remove = m.group(1), m.group(2) or ""
        both = add + remove
        if (
            (m.group(2) is not None and not both)
            or set(both) - set("ims")
            or len(set(both)) != len(both)
        ):
            raise self.fail("Invalid regular expression modifiers")
        self.pos += m.end()
        saved = (self.ignore_case, self.multiline, self.dot_all)
        for flag, on in [(f, True) for f in add] + [(f, False) for f in remove]:
            if flag == "i":
                self.ignore_case = on
            elif flag == "m":
                self.multiline = on
            else:
                self.dot_all = on
        body = self.disjunction()
        self.ignore_case, self.multiline, self.dot_all = saved
        if self.peek() != ")":
            raise self.fail("Unterminated group")
        self.pos += 1
        return f"(?:{body})", True

    def group_name(self) -> str:
        end = self.src.find(">", self.pos)
        if end == -1:
            raise self.fail("Invalid capture group name")
        name = self.src[self.pos : end]
        if not name or not (name.replace("$", "_").isidentifier()):
            raise self.fail("Invalid capture group name")
        self.pos = end + 1
        return name

    def backreference(self, number: int) -> str:
        if number not in self.closed:
            return "(?:)"  # forward or self reference: the group is still undefined in JS
        ref = f"(?i:\\{number})" if self.ignore_case else f"\\{number}"
        return f"(?({number}){ref})"

    def literal(self, ch: str) -> str:
        cu = ord(ch)
        if self.ignore_case and cu in _case_groups():
            return "[" + _range_items(cu, cu, True) + "]"
        return _esc(ch)

    def atom(self) -> str:
        ch = self.peek()
        if ch == ".":
            self.pos += 1
            return r"[\s\S]" if self.dot_all else r"[^\n\r\u2028\u2029]"
        if ch == "[":
            return self.char_class()
        if ch in ("*", "+", "?"):
            raise self.fail("Nothing to repeat")
        if ch == "{" and self._braced_quantifier() is not None:
            raise self.fail("Nothing to repeat")
        if ch == ")":
            raise self.fail("Unmatched ')'")
        if ch == "\\":
            return self.atom_escape()
        self.pos += 1
        return self.literal(ch)

    def _decimal(self) -> str:
        m = re.match(r"[0-9]+", self.src[self.pos :])
        return m.group(0) if m else ""

    def _legacy_octal(self) -> str:
        """LegacyOctalEscapeSequence at pos (after the backslash): the code unit it denotes."""
        m = re.match(r"[0-3][0-7]{0,2}|[4-7][0-7]?", self.src[self.pos :])
        assert m is not None
        self.pos += m.end()
        return chr(int(m.group(0), 8))

    def character_escape(self, in_class: bool) -> str | None:
        """A CharacterEscape after the backslash (pos on the escape letter), as a code unit.

        Returns None for ``\\c`` without a control letter: then the backslash is literal.
        """
        ch = self.peek()
        if ch == "":
            raise self.fail("\\ at end of pattern")
        controls = {"f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
        if ch in controls:
            self.pos += 1
            return controls[ch]
        if ch == "c":
            letter = self.peek(1)
            ok = letter.isascii() and (letter.isalpha() or (in_class and (letter.isdigit() or letter == "_")))
            if letter and ok:
                self.pos += 2
                return chr(ord(letter) % 32)
            return None
        if ch == "0" and not self.peek(1).isdigit():
            self.pos += 1
            return "\0"
        if ch in "01234567":
            return self._legacy_octal()
        if ch == "x":
            m = re.match(r"x([0-9A-Fa-f]{2})", self.src[self.pos :])
            if m:
                self.pos += 3
                return chr(int(m.group(1), 16))
        if ch == "u":
            m = re.match(r"u([0-9A-Fa-f]{4})", self.src[self.pos :])
            if m:
                self.pos += 5
                return chr(int(m.group(1), 16))
        if ch == "k" and self.has_named:
            raise self.fail("Invalid named reference")
        self.pos += 1
        return ch  # identity escape (Annex B: any character but "c")

    def atom_escape(self) -> str:
        self.pos += 1  # the backslash
        ch = self.peek()
        if ch in _ESCAPE_SETS:
            self.pos += 1
            return f"[{_ESCAPE_SETS[ch]}]"
        if ch.lower() in _ESCAPE_SETS:
            self.pos += 1
            return f"[^{_ESCAPE_SETS[ch.lower()]}]"
        if ch == "k" and self.has_named:
            m = re.match(r"k<([^>]*)>", self.src[self.pos :])
            if not m or m.group(1) not in self._all_group_names():
                raise self.fail("Invalid named capture referenced")
            self.pos += m.end()
            return self.backreference(self._all_group_names()[m.group(1)])
        if ch.isdigit() and ch != "0":
            digits = self._decimal()
            if int(digits) <= self.total_groups:
                self.pos += len(digits)
                return self.backreference(int(digits))
            if ch in "89":
                self.pos += 1
                return _esc(ch)
        unit = self.character_escape(in_class=False)
        if unit is None:
            return _esc("\\")  # "\c" without a letter: a literal backslash, then "c"
        return self.literal(unit)

    def _all_group_names(self) -> dict[str, int]:
        """Every named group of the pattern, numbered in order (a reference may precede it)."""
        names: dict[str, int] = {}
        number = 0
        i, n, in_class = 0, len(self.src), False
        while i < n:
            ch = self.src[i]
            if ch == "\\":
                i += 2
                continue
            if in_class:
                in_class = ch != "]"
            elif ch == "[":
                in_class = True
            elif ch == "(" and not self.src.startswith("(?", i):
                number += 1
            elif self.src.startswith("(?<", i) and self.src[i + 3 : i + 4] not in ("=", "!"):
                number += 1
                end = self.src.find(">", i)
                names.setdefault(self.src[i + 3 : end], number)
            i += 1
        return names

    def class_atom(self) -> tuple[str, int | None]:
        """One ClassAtom: (rendered set, code unit or None when it is a class escape)."""
        ch = self.peek()
        if ch != "\\":
            self.pos += 1
            return "", ord(ch)
        self.pos += 1
        esc = self.peek()
        if esc == "":
            raise self.fail("\\ at end of pattern")
        if esc in _ESCAPE_SETS:
            self.pos += 1
            return _ESCAPE_SETS[esc], None
        if esc.lower() in _ESCAPE_SETS:
            self.pos += 1
            return "NEG:" + esc.lower(), None
        if esc == "b":
            self.pos += 1
            return "", 8
        if esc == "-":
            self.pos += 1
            return "", ord("-")
        if esc in "89":
            self.pos += 1
            return "", ord(esc)
        unit = self.character_escape(in_class=True)
        if unit is None:
            return "", ord("\\")  # "\c" + non-letter: the backslash itself, "c" follows
        return "", ord(unit)

    def char_class(self) -> str:
        self.pos += 1  # "["
        negate = self.peek() == "^"
        if negate:
            self.pos += 1
        items: list[str] = []
        negated_escapes: list[str] = []

        def add_escape(rendered: str) -> None:
            if rendered.startswith("NEG:"):
                negated_escapes.append(rendered[4:])
            else:
                items.append(rendered)

        while True:
            if self.pos >= len(self.src):
                raise self.fail("Unterminated character class")
            if self.peek() == "]":
                self.pos += 1
                break
            rendered, lo = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                rendered_hi, hi = self.class_atom()
                if lo is None or hi is None:
                    # Annex B: a range with a class escape is the union of its parts and "-".
                    for r, u in ((rendered, lo), (rendered_hi, hi)):
                        if u is None:
                            add_escape(r)
                        else:
                            items.append(_range_items(u, u, self.ignore_case))
                    items.append(_esc("-"))
                    continue
                if lo > hi:
                    raise self.fail("Range out of order in character class")
                items.append(_range_items(lo, hi, self.ignore_case))
                continue
            if lo is None:
                add_escape(rendered)
            else:
                items.append(_range_items(lo, lo, self.ignore_case))
        # A negated escape (\D, \S, \W) inside a class: union via an alternation of classes.
        positive = f"[{''.join(items)}]" if items else "(?!)"
        alternatives = [positive] if items else []
        alternatives += [f"[^{_ESCAPE_SETS[e]}]" for e in negated_escapes]
        if not alternatives:
            return r"[\s\S]" if negate else "(?!)"  # [^] is any unit, [] is none
        union = alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"
        if not negate:
            return union
        return f"(?:(?!{union})[\\s\\S])"


_JS_REGEX_CACHE: dict[tuple[str, str], re.Pattern[str]] = {}


def translate_js_regex(source: str, flags: str = "") -> str:
    """The Python ``re`` pattern equivalent to ``new RegExp(source, flags)``.

    Raises JsRegexError when JavaScript would throw a SyntaxError. Supported flags: i, m, s
    (g and y do not change whether ``test`` matches a fresh regex; u and v are not supported).
    """
    unknown = set(flags) - set("imsgy")
    if unknown or len(set(flags)) != len(flags):
        raise JsRegexError(f"Invalid flags supplied to RegExp constructor '{flags}'")
    return _JsRegexParser(source, flags).translate()


def compile_js_regex(source: str, flags: str = "") -> re.Pattern[str]:
    """Compile a JavaScript regex for ``search`` over ``utf16_units`` text (cached)."""
    key = (source, flags)
    cached = _JS_REGEX_CACHE.get(key)
    if cached is not None:
        return cached
    translated = translate_js_regex(source, flags)
    try:
        compiled = re.compile(translated)
    except (re.error, OverflowError, RecursionError) as exc:
        raise JsRegexError(f"untranslatable JavaScript regex /{source}/: {exc}") from exc
    if len(_JS_REGEX_CACHE) < 4096:
        _JS_REGEX_CACHE[key] = compiled
    return compiled
