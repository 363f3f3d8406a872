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
from collections.abc import Callable, Iterator
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Final

import orjson

from graders.jsrt.lazylist import LazyList

# JSON arrays: lists, and the trace's lazy sequences (graders/jsrt/lazylist.py).
_ARRAYS: Final = (list, LazyList)

__all__ = [
    "UNDEFINED",
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
    "utf16_len",
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


# Where either pattern above can match. The patterns scan slowly (~1 µs on a short text, per
# call of every tool call), so the text is first mapped in C: digits and "-" deleted, the three
# float marks to ".", the characters a match starts with to ":" (and '"', "{" kept), all else
# to " ". A float token ``[:,[]-?\d+[.eE]`` then reads ":." (or "." first) and an index key
# ``[{,]"\d+":`` reads '"":', so only a text that has one is scanned exactly. With the digits
# deleted, a file name like "module_15.py" (a "_" before the digits) or an integer value
# (``"n":100}``) no longer sets the float screen off. ``find`` is used, not ``in``: on
# bytes it is about half the cost.
_SHAPE: Final = bytes(
    0x2E if i in b".eE" else 0x3A if i in b":,[" else i if i in b'"{' else 0x20 for i in range(256))
_SHAPE_DELETE: Final = b"0123456789-"


def _may_have_float_token(shape: bytes) -> bool:
    """The float screen on a shape: whether ``_FLOAT_TOKEN`` may match the text."""
    return shape.find(b":.") >= 0 or shape[:1] == b"."


def _orjson_text(value: Any, sort_keys: bool) -> str | None:
    try:
        out = orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else 0)
    except (TypeError, orjson.JSONEncodeError):  # undefined, lone surrogates, big integers
        return None
    shape = out.translate(_SHAPE, _SHAPE_DELETE)
    if _may_have_float_token(shape) and _FLOAT_TOKEN.search(out):
        return None
    if sort_keys:
        if not out.isascii() and _SORT_UNSAFE.search(out):
            return None
    elif shape.find(b'"":') >= 0 and _INDEX_KEY.search(out):
        return None
    return out.decode()


def js_stringify(value: Any, indent: int = 0) -> str | None:
    """``JSON.stringify(value, null, indent)``; ``None`` when the result is undefined."""
    if value is UNDEFINED:
        return None
    if indent:
        return _stringify_pretty(value, " " * indent, "")
    if type(value) is str:  # e.g. the loops grader's "" for a call without arguments
        return _quote(value)
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


# An array's or object's text, opened: its first character, the (separator and key, value) pairs
# still to write, and its last character; None for a scalar.
Opened = tuple[str, Iterator[tuple[str, Any]], str] | None


def _nested_text(value: Any, opened: Callable[[Any], Opened], scalar: Callable[[Any], str]) -> str:
    """JSON text written with an explicit stack instead of recursion: the same text at any depth."""
    out: list[str] = []
    stack: list[tuple[Iterator[tuple[str, Any]], str]] = []  # per open array or object

    def enter(prefix: str, v: Any) -> None:
        out.append(prefix)
        container = opened(v)
        if container is None:
            out.append(scalar(v))
        else:
            out.append(container[0])
            stack.append(container[1:])

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


def _items(v: Any) -> Iterator[tuple[str, Any]]:
    return (("," if i else "", x) for i, x in enumerate(v))


def _js_opened(v: Any) -> Opened:
    if isinstance(v, _ARRAYS):
        return "[", _items(v), "]"
    if isinstance(v, dict):
        keys = [k for k in js_key_order(v) if v[k] is not UNDEFINED]
        return "{", ((("," if i else "") + _quote(k) + ":", v[k]) for i, k in enumerate(keys)), "}"
    return None


def _stringify_nested(value: Any) -> str:
    """``_stringify`` without recursion (undefined in an array is "null", as ``_stringify`` writes it)."""
    return _nested_text(value, _js_opened, _stringify)


def js_sort_key(text: str) -> bytes:
    """Default ``Array.prototype.sort`` order for strings (UTF-16 code units)."""
    return text.encode("utf-16-be", "surrogatepass")


def stable_stringify(value: Any) -> str:
    """Key-sorted JSON used by gh-aw's dedupe keys (``undefined`` becomes "")."""
    if isinstance(value, (dict, list)):
        text = _orjson_text(value, True)
        if text is not None:
            return text
    try:
        return _stable_stringify(value)
    except RecursionError:  # valid data nested deeper than the stack allows (orjson stops at 255)
        return _stable_stringify_nested(value)


def _sorted_keys(value: dict[str, Any]) -> list[str]:
    keys = list(value)
    # For ASCII keys code-point order is UTF-16 order; others need the UTF-16 sort key.
    if all(k.isascii() for k in keys):
        keys.sort()
    else:
        keys.sort(key=js_sort_key)
    return keys


def _stable_opened(v: Any) -> Opened:
    if isinstance(v, dict):
        return "{", ((("," if i else "") + _quote(k) + ":", v[k]) for i, k in enumerate(_sorted_keys(v))), "}"
    if isinstance(v, _ARRAYS):
        return "[", _items(v), "]"
    return None


def _stable_stringify_nested(value: Any) -> str:
    """``_stable_stringify`` without recursion: the same text at any depth."""
    return _nested_text(value, _stable_opened, _stable_stringify)


def _stable_stringify(value: Any) -> str:
    # Exact-type fast paths first: this runs once per tool call of every run.
    t = type(value)
    if t is str:
        return _quote(value)
    if isinstance(value, dict):
        return "{" + ",".join([_quote(k) + ":" + _stable_stringify(value[k]) for k in _sorted_keys(value)]) + "}"
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
