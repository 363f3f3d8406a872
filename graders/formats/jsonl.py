"""Fail-open JSON Lines reading shared by the audit, transcript and Copilot parsers.

The reference skips blank and non-JSON lines but crashes on a line that parses to a
non-object (spec §10.9). Here every unusable line is skipped and reported through ``warn``
with its 1-based line number; the rest of the file is still graded.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

Warn = Callable[[str], None]


def ignore_warning(message: str) -> None:
    pass


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


def decode(data: bytes, source: str = "<input>", warn: Warn = ignore_warning) -> list[str]:
    """Split like ``read_text().splitlines()``; undecodable bytes become U+FFFD, with a warning."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        warn(f"{source}: not valid UTF-8 ({e.reason} at byte {e.start}); undecodable bytes replaced")
        text = data.decode("utf-8", errors="replace")
    return text.splitlines()


def read_lines(path: str | Path, warn: Warn = ignore_warning) -> list[str]:
    return decode(Path(path).read_bytes(), str(path), warn)


def iter_objects(
    lines: Iterable[str | bytes | dict[str, Any]], source: str = "<input>", warn: Warn = ignore_warning
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every line that is a JSON object; pre-parsed dicts pass through."""
    for lineno, raw in enumerate(lines, 1):
        if isinstance(raw, dict):
            yield lineno, raw
            continue
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8", errors="replace")
        if not isinstance(raw, str):
            warn(f"{source}:{lineno}: skipped: not a text line")
            continue
        line = raw.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            warn(f"{source}:{lineno}: skipped: not valid JSON")
            continue
        if not isinstance(obj, dict):
            warn(f"{source}:{lineno}: skipped: a JSON {json_type(obj)}, not an object")
            continue
        yield lineno, obj
