"""Loading and comparing the gh-aw conformance cases (tests/data/conformance/ghaw/README.md)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import conformance_dir

CASES_DIR = conformance_dir() / "ghaw"


@dataclass(frozen=True)
class Case:
    path: Path
    kind: str
    tags: tuple[str, ...]
    config: dict[str, Any] | None
    expected: dict[str, Any]

    @property
    def name(self) -> str:
        return self.path.name


def load_cases() -> list[Case]:
    cases = []
    for d in sorted(CASES_DIR.glob("case-*")):
        meta = json.loads((d / "case.json").read_text())
        config = json.loads((d / meta["config"]).read_text()) if meta.get("config") else None
        cases.append(Case(d, meta["kind"], tuple(meta["tags"]), config,
                          json.loads((d / "expected.json").read_text())))
    return cases


def numbers_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    return False


def deep_equal(a: Any, b: Any) -> bool:
    """Deep equality with numbers to 1e-9 relative (the README's rule)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(deep_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return numbers_equal(a, b)
    return bool(a == b and type(a) is type(b)) or (a is None and b is None)


def result_disagreements(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """How one grader result differs on the compared fields (value, status, passed, message, error)."""
    out = []
    gv, wv = got.get("value"), want.get("value")
    if not ((gv is None and wv is None) or (gv is not None and wv is not None and numbers_equal(gv, wv))):
        out.append(f"value {gv!r} != {wv!r}")
    for key in ("status", "passed", "message", "error", "name", "unit", "source", "description"):
        if got.get(key, "<absent>") != want.get(key, "<absent>"):
            out.append(f"{key} {got.get(key, '<absent>')!r} != {want.get(key, '<absent>')!r}")
    return out
