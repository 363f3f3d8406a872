"""Bounded, JavaScript-faithful reading of JSON and JSONL artifacts.

The limits and the skip rules are gh-aw's (docs/reference/graders.md §5): files over 50 MiB are skipped,
JSONL lines are trimmed, blank, over-long (1,048,576 UTF-16 units) and unparsable lines are
skipped. Parsing follows ``JSON.parse``: orjson first, then a stdlib fallback for inputs
orjson refuses but JavaScript accepts (numbers beyond float range, integers beyond 64 bits,
lone surrogate escapes).
"""

from __future__ import annotations

import json
import math
import re
import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, cast

import numpy as np
import orjson

from graders.jsrt.digits import has_long_digit_run
from graders.jsrt.jscompat import js_trim, utf16_len
from graders.jsrt.records import DIGIT_SAFE, R, decoder, view

MAX_FILE_SIZE: Final = 50 * 1024 * 1024
MAX_LINE_LENGTH: Final = 1024 * 1024
_ASCII_WS: Final = b" \t\n\r\x0b\x0c"
_MAX_SAFE: Final = 2**53
# Only text with a 16+ digit run can hold an integer beyond 2**53 (JavaScript makes it a double).
_LONG_DIGITS: Final = re.compile(rb"\d{16}")


class Parsed:
    """A value that is not kept as its line: the line needed the slow (reference) parse path."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __reduce__(self) -> tuple[Any, ...]:
        return (Parsed, (self.value,))


Item = bytes | Parsed



class JsonError(ValueError):
    """Text that ``JSON.parse`` would reject."""


class JsonTooDeep(JsonError):
    """Valid JSON nested deeper than ``MAX_DEPTH``, which no reader of fleetgrade reads."""


# One depth for every reader (orjson's own limit): deeper text is refused by name, at any stack
# depth, never by whichever recursion limit the caller happens to be under.
MAX_DEPTH: Final = 1024
TOO_DEEP: Final = f"nested deeper than {MAX_DEPTH} levels, which is more than fleetgrade reads"
_OPEN: Final = frozenset(b"[{")
_STRING: Final = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_DEPTH_CHUNK: Final = 1 << 20


def nesting_depth(data: bytes) -> int:
    """The deepest nesting of arrays and objects in JSON text (strings skipped), in C-speed passes."""
    if not any(b in data for b in (b"[", b"{")):
        return 0
    bare = _STRING.sub(b'""', data)
    depth = deepest = 0
    for start in range(0, len(bare), _DEPTH_CHUNK):
        chunk = np.frombuffer(bare, dtype=np.uint8, count=min(_DEPTH_CHUNK, len(bare) - start), offset=start)
        steps = (chunk == 0x5B).astype(np.int32) + (chunk == 0x7B) - (chunk == 0x5D) - (chunk == 0x7D)
        levels = np.cumsum(steps, dtype=np.int64) + depth
        if len(levels):
            deepest = max(deepest, int(levels.max()))
            depth = int(levels[-1])
    return deepest


def _reject_constant(name: str) -> Any:
    raise JsonError(f"invalid JSON literal {name}")


def _js_int(text: str) -> int | float:
    """An integer token as ``JSON.parse`` reads it: exact within ±2**53, else the nearest double
    (±Infinity past the double range), from the text: never ``int()`` of thousands of digits."""
    digits = len(text) - (text[0] == "-")
    if digits <= 16:
        value = int(text)
        return value if abs(value) <= _MAX_SAFE else float(value)
    return float(text)  # 17+ digits, no leading zero: beyond 2**53


def _js_str(text: str) -> str:
    """A string as JavaScript holds it once written back as UTF-8: lone surrogates as U+FFFD."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _js_numbers(value: Any) -> Any:
    """Apply JavaScript's number model to parsed data in place (integers beyond ±2**53 become
    doubles, lone surrogates U+FFFD), with an explicit stack: as deep as ``MAX_DEPTH`` at any
    stack depth."""
    root = [value]
    stack: list[Any] = [root]
    while stack:
        container = stack.pop()
        if type(container) is list:
            for i, v in enumerate(container):
                container[i] = _js_value(v, stack)
            continue
        for k, v in container.items():
            container[k] = _js_value(v, stack)
        if not all(map(str.isascii, container)):
            items = list(container.items())
            container.clear()
            container.update((_js_str(k), v) for k, v in items)
    return root[0]


def _js_value(v: Any, stack: list[Any]) -> Any:
    """One value as JavaScript reads it; an array or object is left for ``stack``."""
    t = type(v)
    if t is int:
        return _big_int(v) if abs(v) > _MAX_SAFE else v
    if t is str:
        return _js_str(v)
    if t is list or t is dict:
        stack.append(v)
    return v


def _big_int(value: int) -> float:
    try:
        return float(value)
    except OverflowError:
        return math.copysign(math.inf, value)


def parse_json(data: bytes | str) -> Any:
    """``JSON.parse`` semantics; raises :class:`JsonError` on invalid input, :class:`JsonTooDeep`
    on input nested deeper than ``MAX_DEPTH``."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if str(exc).startswith("depth limit exceeded"):
            raise JsonTooDeep(TOO_DEEP) from None
    else:
        raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
        return _js_numbers(value) if has_long_digit_run(raw) else value
    return _reference_parse(data)


_HEADROOM = threading.Lock()


def _reference_parse(data: bytes | str) -> Any:
    """What orjson refuses and ``JSON.parse`` accepts (numbers beyond the double range, lone
    surrogate escapes), read by the stdlib with the recursion limit raised, for the time of the
    parse, to what ``MAX_DEPTH`` needs above the caller's stack."""
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    if nesting_depth(raw) > MAX_DEPTH:
        raise JsonTooDeep(TOO_DEEP)
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    with _HEADROOM:
        frames, frame = 0, sys._getframe()
        while frame.f_back is not None:
            frames, frame = frames + 1, frame.f_back
        limit, needed = sys.getrecursionlimit(), frames + MAX_DEPTH + 64
        sys.setrecursionlimit(max(limit, needed))
        try:
            value = json.loads(text, parse_int=_js_int, parse_constant=_reject_constant)
        except RecursionError as exc:
            raise JsonTooDeep(TOO_DEEP) from exc
        except ValueError as exc:
            raise JsonError(str(exc)) from exc
        finally:
            sys.setrecursionlimit(limit)
    return _js_numbers(value)


@dataclass
class JsonlStats:
    """What a JSONL read skipped, so nothing disappears silently."""

    lines: int = 0
    blank: int = 0
    oversized: int = 0
    unparsable: int = 0
    null: int = 0
    skipped_examples: list[str] = field(default_factory=list)

    def note(self, kind: str, lineno: int) -> None:
        if len(self.skipped_examples) < 5:
            self.skipped_examples.append(f"line {lineno}: {kind}")


def _clean_line(raw: bytes) -> bytes | str | None:
    """Trim a line as ``String.prototype.trim`` would; None when it is blank."""
    stripped = raw.strip(_ASCII_WS)
    if not stripped:
        return None
    if stripped[0] < 0x80 and stripped[-1] < 0x80:
        return stripped
    text = js_trim(stripped.decode("utf-8", "replace"))
    return text or None


def _slow_line(raw: bytes, stats: JsonlStats, lineno: int) -> Any:
    """The reference rules for one line, step by step; ``_SKIP`` when the line is skipped."""
    line = _clean_line(raw)
    if line is None:
        stats.blank += 1
        return _SKIP
    if len(line) > MAX_LINE_LENGTH:
        text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
        if utf16_len(text) > MAX_LINE_LENGTH:
            stats.oversized += 1
            stats.note("longer than 1048576 characters", lineno)
            return _SKIP
    try:
        value = parse_json(line)
    except JsonError:
        stats.unparsable += 1
        stats.note("not valid JSON", lineno)
        return _SKIP
    if value is None:
        stats.null += 1
        stats.note("literal null", lineno)
        return _SKIP
    return value


_SKIP: Final = object()


class LineBatch(list[bytes]):
    """The lines of one read block, with the block-wide answers of :func:`_screen` that the
    block's own bytes give without a pass over its lines (``runfiles.iter_line_batches``).

    ``short``: whether every stripped line is within ``MAX_LINE_LENGTH`` bytes. ``long_digits``:
    whether the lines hold a 16-digit run (stripping and dropping blank lines removes no digit
    and joins no two runs), scanned from ``sources`` (the block's bytes holding the lines) when
    first asked: a batch of digit-safe records is never asked (``records.DIGIT_SAFE``).
    """

    __slots__ = ("_long_digits", "short", "sources")

    def __init__(self, lines: list[bytes], sources: tuple[bytes | memoryview, ...], short: bool) -> None:
        super().__init__(lines)
        self.sources = sources
        self.short = short
        self._long_digits: bool | None = None

    @property
    def long_digits(self) -> bool:
        if self._long_digits is None:
            self._long_digits = any(map(has_long_digit_run, self.sources))
            self.sources = ()
        return self._long_digits


def parse_jsonl_items(lines: list[bytes], stats: JsonlStats, first_lineno: int = 1) -> tuple[list[Item], list[Any]]:
    """Parse a batch of JSONL lines (without or with their ``\n``) under gh-aw's skip rules.

    Returns the kept records twice: as lazy items (the stripped line, or the value when the
    line needed the slow path; see ``lazyjson``) and as parsed values, in line order.

    The batch path does the per-line work in C (``map``) and holds when every non-blank line
    is under the length limit, orjson accepts it, and none is a literal null: then the trimmed
    line cannot have had non-ASCII (JavaScript-only) whitespace, since JSON allows none around
    a value. Any other batch takes the line-by-line path, whose rule-by-rule reference for a
    line is :func:`_slow_line`. Per-line Python overhead dominated preprocessing (make bench).
    """
    return _parse_screened(lines, stats, first_lineno, *_screen(lines))


def _kept(lines: list[bytes]) -> tuple[list[bytes], bool]:
    """A batch's trimmed non-blank lines, and whether none is over the length limit."""
    kept: list[bytes] = list(filter(None, map(bytes.strip, lines)))
    if type(lines) is LineBatch:
        return kept, lines.short
    return kept, not kept or max(map(len, kept)) <= MAX_LINE_LENGTH


def _long_digits(lines: list[bytes], kept: list[bytes]) -> bool:
    """Whether the kept lines of a batch hold a 16-digit run."""
    if type(lines) is LineBatch:
        return lines.long_digits
    return has_long_digit_run(b"\n".join(kept))


def _screen(lines: list[bytes]) -> tuple[list[bytes], bool, bool]:
    """The tests of a batch that need no parse: its trimmed non-blank lines, whether they hold a
    16-digit run, and whether a batch path may hold (no such run, no over-long line)."""
    kept, short = _kept(lines)
    long_digits = _long_digits(lines, kept)
    return kept, long_digits, not long_digits and short


def _parse_screened(lines: list[bytes], stats: JsonlStats, first_lineno: int, kept: list[bytes],
                    long_digits: bool, batchable: bool) -> tuple[list[Item], list[Any]]:
    """:func:`parse_jsonl_items` of a batch already screened by :func:`_screen`."""
    stats.lines += len(lines)
    if batchable:
        try:
            values = list(map(orjson.loads, kept))
        except orjson.JSONDecodeError:
            pass
        else:
            if None not in values:
                stats.blank += len(lines) - len(kept)
                return cast(list[Item], kept), values
    return _parse_lines(lines, stats, first_lineno, long_digits)


def parse_jsonl_records(lines: list[bytes], stats: JsonlStats, record_type: type[R], first_lineno: int = 1,
                        strict_types: tuple[type[R], ...] = ()) -> tuple[list[Item], list[R | None]]:
    """:func:`parse_jsonl_items`, with each kept record seen as a ``record_type`` struct.

    The fast path decodes only the struct's fields (``records``), in C, and keeps the lines.
    It holds when no line of the batch is over the length limit, msgspec decodes every line
    into the struct, and the batch holds no 16-digit run unless the struct is digit-safe;
    msgspec then accepts a line only where orjson does or where the reference path keeps the
    line anyway (a float beyond range or bad UTF-8 in a field not read; ``load_item`` parses
    such a line as the reference does), and it rejects literal nulls and non-records. Any
    other batch takes the reference path (screened once) and views its values.

    ``strict_types``, narrower structs with the same fields (or the same values under other
    names), are tried first, in order, on the fast path: the records are all of the first type
    every line decodes into.
    """
    kept, short = _kept(lines)
    if kept and short:
        for rt in (*strict_types, record_type):
            # A 16-digit run may be an integer beyond 2**53, which JavaScript reads as a double:
            # only a digit-safe struct can hold one and still be read as JSON.parse's record
            # (records.DIGIT_SAFE). Most of a large run's lines are such records.
            if rt not in DIGIT_SAFE and _long_digits(lines, kept):
                continue
            try:
                records = list(map(decoder(rt).decode, kept))
            except (ValueError, RecursionError):  # msgspec's DecodeError and ValidationError are ValueErrors
                continue
            stats.lines += len(lines)
            stats.blank += len(lines) - len(kept)
            return cast(list[Item], kept), cast(list[R | None], records)
    long_digits = _long_digits(lines, kept)
    items, values = _parse_screened(lines, stats, first_lineno, kept, long_digits, not long_digits and short)
    return items, [view(record_type, v) for v in values]


def _parse_lines(lines: list[bytes], stats: JsonlStats, first_lineno: int,
                 long_digits: bool) -> tuple[list[Item], list[Any]]:
    items: list[Item] = []
    out: list[Any] = []
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    for i, raw in enumerate(lines):
        s = raw.strip(_ASCII_WS)
        if not s:
            stats.blank += 1
            continue
        item: Item = s
        if s[0] < 0x80 and s[-1] < 0x80 and len(s) <= MAX_LINE_LENGTH:
            try:
                value = loads(s)
            except decode_error:
                value = _slow_line(raw, stats, first_lineno + i)
                item = Parsed(value)
            else:
                if long_digits and _LONG_DIGITS.search(s):
                    value = _js_numbers(value)
                    item = Parsed(value)
                if value is None:
                    stats.null += 1
                    stats.note("literal null", first_lineno + i)
                    continue
        else:
            value = _slow_line(raw, stats, first_lineno + i)
            item = Parsed(value)
        if value is not _SKIP:
            items.append(item)
            out.append(value)
    return items, out


def parse_jsonl_batch(lines: list[bytes], stats: JsonlStats, first_lineno: int = 1) -> list[Any]:
    """The parsed records of a batch of JSONL lines (see :func:`parse_jsonl_items`)."""
    return parse_jsonl_items(lines, stats, first_lineno)[1]


def iter_jsonl(lines: Iterable[bytes], stats: JsonlStats | None = None) -> Iterator[Any]:
    """Parse JSONL lines (split on ``\\n``), skipping what gh-aw skips.

    Literal ``null`` lines are dropped and counted: the reference crashes on them in the
    token-usage and gateway logs; we keep grading the run instead (README, "Deviations").
    """
    stats = stats if stats is not None else JsonlStats()
    for lineno, raw in enumerate(lines, start=1):
        yield from parse_jsonl_batch([raw], stats, lineno)


def too_deep(data: bytes) -> bool:
    """Whether ``data`` is refused for its depth (the reason ``parse_json_document`` gave null)."""
    try:
        parse_json(data)
    except JsonTooDeep:
        return True
    except JsonError:
        return False
    return False


def parse_json_document(data: bytes) -> Any:
    """``safeParseJson``: whole-file JSON, null when unparsable (UTF-8 decoded with U+FFFD)."""
    try:
        return parse_json(data)
    except JsonError:
        pass
    try:
        return parse_json(data.decode("utf-8", "replace"))
    except JsonError:
        return None


def is_finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
