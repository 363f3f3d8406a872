"""What a run's values must be to enter an aggregate (docs/statistics.md, "What the statistics take").

One validation for every stage that computes across runs: a grader value is a finite float
within ±:data:`MAX_ABS_VALUE`, so every sum, square and product the statistics make of a window's
values stays finite in float64 (10¹⁰⁰ squared is 10²⁰⁰, and a billion of those is still far below
the float maximum); a date is a ``YYYY-MM-DD`` day from :data:`FIRST_DATE` to :data:`LAST_DATE`,
so every window date derived from it (up to two 3,660-day regression windows back, 27 days
forward) is one ``datetime`` and every reader (BigQuery's DATE: years 1–9999) accept. A value or
date that fails is a warning on its run and stays out of the aggregates; it never raises.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
from typing import Any, Final

MAX_ABS_VALUE: Final = 1e100
FIRST_DATE: Final = "0100-01-01"
LAST_DATE: Final = "9999-11-30"
_FIRST, _LAST = dt.date.fromisoformat(FIRST_DATE).toordinal(), dt.date.fromisoformat(LAST_DATE).toordinal()


def number(value: Any) -> float | None:
    """A JSON number as a finite float, or None (not a number, a boolean, NaN, ±inf, or an
    integer beyond the float range)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        x = float(value)
    except OverflowError:
        return None
    return x if math.isfinite(x) else None


def value_problem(value: float) -> str | None:
    """Why a graded value cannot enter an aggregate, or None when it can."""
    if not math.isfinite(value):
        return f"value {value!r} is not finite"
    if abs(value) > MAX_ABS_VALUE:
        return f"value {value:.6g} is beyond ±{MAX_ABS_VALUE:g}, the range the statistics compute in"
    return None


def ordinal(date: Any) -> int | None:
    """The proleptic ordinal of a ``YYYY-MM-DD`` date in [FIRST_DATE, LAST_DATE], else None."""
    if not isinstance(date, str) or len(date) != 10:
        return None
    return _ordinal(date)


@functools.lru_cache(maxsize=1 << 16)
def _ordinal(date: str) -> int | None:
    try:
        day = dt.date.fromisoformat(date).toordinal()
    except ValueError:
        return None
    return day if _FIRST <= day <= _LAST else None


def date_problem(date: Any) -> str | None:
    """Why a run's date cannot enter the statistics, or None when it can."""
    if ordinal(date) is not None:
        return None
    return f"date {date!r} is outside {FIRST_DATE} … {LAST_DATE}, the dates the statistics' windows span"


def iso(day: int) -> str:
    """The ``YYYY-MM-DD`` of an ordinal (one that :func:`ordinal` admitted, or a window bound of one)."""
    return dt.date.fromordinal(day).isoformat()
