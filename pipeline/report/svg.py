"""Inline SVG charts, generated as text: no script, no external resource, deterministic coordinates.

Every mark carries ``data-metric`` / ``data-*`` attributes with the exact number it draws, so a
test (or a reader's devtools) can check the chart against the tables.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from html import escape
from typing import Any

from graders.stats.estimators import wilson_interval

PASS, FAIL, NEUTRAL, LINE, GRID = "#2f7d43", "#c0392b", "#7b8794", "#2b6cb0", "#e3e7ec"
VERDICT_COLORS = {"clean-pass": PASS, "pass-with-warnings": "#d69e2e", "corrupt-success": "#8e44ad", "fail": FAIL}
VERDICTS = ("clean-pass", "pass-with-warnings", "corrupt-success", "fail")


def attr(v: Any) -> str:
    return escape(str(v), quote=True)


def fmt_num(v: float | int | None) -> str:
    """Short, stable number text: integers as such, otherwise 3 significant digits."""
    if v is None:
        return "–"
    if float(v).is_integer() and abs(v) < 1e15:
        return f"{int(v):,}"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"


def fmt_rate(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f}%"


def _open(w: int, h: int, label: str, cls: str) -> str:
    return (f'<svg class="{cls}" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" '
            f'aria-label="{attr(label)}" xmlns="http://www.w3.org/2000/svg">')


def pass_rate_chart(workflow: str, points: Sequence[dict[str, Any]], first: dt.date, last: dt.date) -> str:
    """Pass rate of one workflow per day, on a shared date axis so small multiples line up."""
    w, h, left, right, top, bottom = 340, 150, 40, 12, 12, 26
    span = max((last - first).days, 1)

    def x(d: dt.date) -> float:
        if first == last:
            return left + (w - left - right) / 2
        return left + (w - left - right) * (d - first).days / span

    def y(r: float) -> float:
        return top + (h - top - bottom) * (1 - r)

    out = [_open(w, h, f"pass rate per day, {workflow}", "chart line-chart")]
    for r in (0.0, 0.5, 1.0):
        out.append(f'<line x1="{left}" x2="{w - right}" y1="{y(r):.1f}" y2="{y(r):.1f}" stroke="{GRID}"/>')
        out.append(f'<text x="{left - 4}" y="{y(r) + 4:.1f}" class="tick" text-anchor="end">{int(r * 100)}%</text>')
    out.append(f'<text x="{left}" y="{h - 6}" class="tick">{first.isoformat()}</text>')
    if last != first:
        out.append(f'<text x="{w - right}" y="{h - 6}" class="tick" text-anchor="end">{last.isoformat()}</text>')
    coords = [(x(p["date"]), y(p["passed"] / p["gated"])) for p in points]
    # The 95% Wilson interval of each day's rate: a band, so a day of 2 runs looks as unsure as it is.
    bands = [wilson_interval(p["passed"], p["gated"]) or (0.0, 1.0) for p in points]
    if len(coords) > 1:
        out.append(_band([(cx, y(b[1])) for (cx, _), b in zip(coords, bands, strict=True)],
                         [(cx, y(b[0])) for (cx, _), b in zip(coords, bands, strict=True)], "pass-rate-band"))
        path = " ".join(f"{cx:.1f},{cy:.1f}" for cx, cy in coords)
        out.append(f'<polyline points="{path}" fill="none" stroke="{LINE}" stroke-width="2"/>')
    for p, (cx, cy) in zip(points, coords, strict=True):
        rate = p["passed"] / p["gated"]
        out.append(
            f'<circle class="point" cx="{cx:.1f}" cy="{cy:.1f}" r="3.5" fill="{LINE}" data-metric="pass-rate" '
            f'data-workflow="{attr(workflow)}" data-date="{p["date"].isoformat()}" data-value="{rate:.6f}" '
            f'data-passed="{p["passed"]}" data-gated="{p["gated"]}">'
            f'<title>{attr(workflow)} {p["date"].isoformat()}: {fmt_rate(rate)} ({p["passed"]}/{p["gated"]})</title>'
            "</circle>")
    out.append("</svg>")
    return "".join(out)


def _passes(v: float, direction: str | None, threshold: float | None) -> bool | None:
    if threshold is None or direction not in ("higher_is_better", "lower_is_better"):
        return None
    return v >= threshold if direction == "higher_is_better" else v <= threshold


def histogram(spec: dict[str, Any]) -> str:
    """Fixed bins from SQL; bars coloured by which side of the threshold their centre falls."""
    w, h, left, right, top, bottom = 340, 140, 34, 10, 16, 26
    counts: list[int] = spec["counts"]
    start, width, bins = float(spec["start"]), float(spec["width"]), len(counts)
    end = start + width * bins
    peak = max(counts) or 1
    pw, ph = w - left - right, h - top - bottom

    def x(v: float) -> float:
        return left + pw * (v - start) / (end - start)

    gid = attr(spec["grader_id"])
    out = [_open(w, h, f"distribution of {spec['grader_id']}", "chart histogram")]
    out.append(f'<line x1="{left}" x2="{w - right}" y1="{top + ph}" y2="{top + ph}" stroke="{NEUTRAL}"/>')
    out.append(f'<text x="{left - 4}" y="{top + 4}" class="tick" text-anchor="end">{peak}</text>')
    for i, n in enumerate(counts):
        lo, hi = start + i * width, start + (i + 1) * width
        ok = _passes((lo + hi) / 2, spec["direction"], spec["threshold"])
        color = NEUTRAL if ok is None else (PASS if ok else FAIL)
        bh = ph * n / peak
        out.append(
            f'<rect class="bar" x="{x(lo) + 0.5:.1f}" y="{top + ph - bh:.1f}" width="{max(x(hi) - x(lo) - 1, 0.5):.1f}" '
            f'height="{bh:.1f}" fill="{color}" data-metric="hist-bin" data-grader="{gid}" data-bin="{i}" '
            f'data-count="{n}"><title>[{fmt_num(lo)}, {fmt_num(hi)}): {n}</title></rect>')
    out.append(f'<text x="{left}" y="{h - 8}" class="tick">{fmt_num(start + (width / 2 if width == 1 else 0))}</text>')
    out.append(f'<text x="{w - right}" y="{h - 8}" class="tick" text-anchor="end">'
               f'{fmt_num(end - (width / 2 if width == 1 else 0))}</text>')
    if spec["threshold"] is not None:
        tx = x(float(spec["threshold"]))
        anchor = "end" if tx > left + pw / 2 else "start"
        dx = -4 if anchor == "end" else 4
        out.append(
            f'<line class="threshold" x1="{tx:.1f}" x2="{tx:.1f}" y1="{top - 6}" y2="{top + ph}" stroke="#1a202c" '
            f'stroke-width="1.5" stroke-dasharray="4 3" data-metric="threshold" data-grader="{gid}" '
            f'data-value="{spec["threshold"]}"/>')
        out.append(f'<text x="{tx + dx:.1f}" y="{top + 2}" class="tick strong" text-anchor="{anchor}">'
                   f'threshold {fmt_num(spec["threshold"])}</text>')
    out.append("</svg>")
    return "".join(out)


def verdict_bar(workflow: str, counts: dict[str, int]) -> str:
    """One stacked horizontal bar of a workflow's trace verdicts."""
    w, h = 420, 18
    total = sum(counts.values()) or 1
    out = [_open(w, h, f"trace verdicts, {workflow}", "chart verdict-bar")]
    x0 = 0.0
    for v in VERDICTS:
        n = counts.get(v, 0)
        bw = w * n / total
        out.append(
            f'<rect class="seg" x="{x0:.1f}" y="0" width="{bw:.1f}" height="{h}" fill="{VERDICT_COLORS[v]}" '
            f'data-metric="verdict-count" data-workflow="{attr(workflow)}" data-verdict="{v}" data-value="{n}">'
            f"<title>{v}: {n}</title></rect>")
        x0 += bw
    out.append("</svg>")
    return "".join(out)


def meter(value: float | None, label: str, extra: str = "") -> str:
    """A tiny 0..1 bar for table cells (pass^k)."""
    w, h = 64, 10
    if value is None:
        return '<span class="muted">–</span>'
    color = PASS if value >= 0.9 else ("#d69e2e" if value >= 0.5 else FAIL)
    return (f'<svg class="meter" viewBox="0 0 {w} {h}" width="{w}" height="{h}" aria-label="{attr(label)}" '
            f'xmlns="http://www.w3.org/2000/svg"><rect width="{w}" height="{h}" fill="{GRID}"/>'
            f'<rect width="{w * value:.1f}" height="{h}" fill="{color}" {extra}/></svg> {value:.2f}')


def _band(upper: Sequence[tuple[float, float]], lower: Sequence[tuple[float, float]], metric: str) -> str:
    """A filled interval band between two polylines (upper left→right, lower back)."""
    pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in [*upper, *reversed(lower)])
    return f'<polygon class="band" data-metric="{metric}" points="{pts}" fill="{LINE}" fill-opacity="0.15" stroke="none"/>'


def mean_chart(workflow: str, grader: str, points: Sequence[dict[str, Any]], first: dt.date, last: dt.date,
               change: str | None = None, current_start: str | None = None) -> str:
    """A grader's daily mean with its 95% interval band (``grader_stats``, 1-day
    windows), the current window shaded and the change point marked."""
    w, h, left, right, top, bottom = 360, 150, 48, 12, 12, 26
    span = max((last - first).days, 1)
    # The scale follows the means: a day of two runs has an interval many times the series' own
    # movement (t at 1 df), which would flatten the line the reader came for. A band past the
    # scale is drawn to its edge; each point's title gives its whole interval.
    means = [p["mean"] for p in points if p["mean"] is not None]
    lo, hi = (min(means), max(means)) if means else (0.0, 1.0)
    pad = (hi - lo) * 0.25 if hi > lo else max(abs(hi) * 0.1, 0.5)
    floor = 0.0 if lo >= 0 else lo - pad  # a series never below 0 (counts, rates) is not drawn below it
    lo, hi = max(lo - pad, floor), hi + pad

    def x(d: dt.date) -> float:
        return left + (w - left - right) * (d - first).days / span

    def y(v: float) -> float:
        return top + (h - top - bottom) * (1 - (min(max(v, lo), hi) - lo) / (hi - lo))

    out = [_open(w, h, f"daily mean of {grader}, {workflow}", "chart line-chart")]
    if current_start:
        cx = x(dt.date.fromisoformat(current_start))
        out.append(f'<rect x="{cx:.1f}" y="{top}" width="{w - right - cx:.1f}" height="{h - top - bottom}" '
                   f'fill="{GRID}" fill-opacity="0.6" data-metric="current-window"/>')
    for v in (lo, hi):
        out.append(f'<text x="{left - 4}" y="{y(v) + 4:.1f}" class="tick" text-anchor="end">{fmt_num(v)}</text>')
    out.append(f'<text x="{left}" y="{h - 6}" class="tick">{first.isoformat()}</text>')
    out.append(f'<text x="{w - right}" y="{h - 6}" class="tick" text-anchor="end">{last.isoformat()}</text>')
    banded = [p for p in points if p["ci_low"] is not None and p["ci_high"] is not None]
    if len(banded) > 1:
        out.append(_band([(x(p["date"]), y(p["ci_high"])) for p in banded],
                         [(x(p["date"]), y(p["ci_low"])) for p in banded], "mean-band"))
    dots = [p for p in points if p["mean"] is not None]
    if len(dots) > 1:
        path = " ".join(f"{x(p['date']):.1f},{y(p['mean']):.1f}" for p in dots)
        out.append(f'<polyline points="{path}" fill="none" stroke="{LINE}" stroke-width="2"/>')
    for p in dots:
        band = "" if p["ci_low"] is None else f" [{fmt_num(p['ci_low'])}, {fmt_num(p['ci_high'])}]"
        out.append(
            f'<circle cx="{x(p["date"]):.1f}" cy="{y(p["mean"]):.1f}" r="3" fill="{LINE}" data-metric="daily-mean" '
            f'data-workflow="{attr(workflow)}" data-grader="{attr(grader)}" data-date="{p["date"].isoformat()}" '
            f'data-value="{p["mean"]:.6g}"><title>{p["date"].isoformat()}: {fmt_num(p["mean"])}{band} '
            f'(n={p["n"]})</title></circle>')
    if change:
        cx = x(dt.date.fromisoformat(change))
        out.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{top}" y2="{h - bottom}" stroke="{FAIL}" '
                   f'stroke-dasharray="4 3" data-metric="change-point" data-date="{change}"/>')
    out.append("</svg>")
    return "".join(out)
