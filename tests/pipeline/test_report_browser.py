"""The report in headless Chromium: it loads offline with no console message, the SVG charts are
in the rendered DOM with the expected number of marks, and the screenshot is not blank.

Console messages (including Content-Security-Policy violations, which any external fetch would
raise) are read from Chromium's stderr log (``--enable-logging=stderr``): the page has no script,
so it must log nothing at all.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pipeline.cli import main
from tests.pipeline.report_fixtures import build_rows, write_output
from tests.pipeline.test_report import parse
from tools.screenshot import browse, find_browser


@pytest.fixture(scope="module")
def browser() -> str:
    path = find_browser()
    if path is None:
        pytest.skip("chromium is not installed (make system-deps installs it)")
    return path


def run_browser(browser: str, tmp: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return browse(browser, url, tmp / f"profile-{len(list(tmp.glob('profile-*')))}", *args)


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    out = write_output(tmp_path_factory.mktemp("browser") / "out", build_rows())
    assert main(["report", str(out)]) == 0
    return out / "report.html"


def test_renders_offline_with_charts_and_no_console_messages(browser, page, tmp_path):
    proc = run_browser(browser, tmp_path, page.as_uri(), "--dump-dom")
    assert console_lines(proc.stderr) == []
    dom = parse(proc.stdout)
    tags = [t for t, _ in dom]
    assert "section" in tags and "svg" in tags
    by_metric: dict[str, int] = {}
    for _, a in dom:
        if a.get("data-metric"):
            by_metric[a["data-metric"]] = by_metric.get(a["data-metric"], 0) + 1
    assert by_metric["pass-rate"] == 3 * 20  # one point per (workflow, day)
    assert by_metric["hist-bin"] == 20 + 6 + 20  # g-rate, g-count (one bar per value 0..5), g-info
    assert by_metric["threshold"] == 2
    assert by_metric["verdict-count"] == 3 * 4
    svgs = [a for t, a in dom if t == "svg" and "chart" in (a.get("class") or "")]
    assert len(svgs) == 3 + 3 + 3  # pass-rate small multiples, histograms, verdict bars
    assert sum(1 for t, a in dom if t == "polyline") == 3


def test_console_check_catches_errors(browser, tmp_path):
    # The detector must see what a broken page logs: a blocked external image and an uncaught error.
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><meta http-equiv="Content-Security-Policy" content="default-src \'none\'">'
                   '<img src="http://example.invalid/x.png"><p>x</p>', encoding="utf-8")
    assert console_lines(run_browser(browser, tmp_path, bad.as_uri(), "--dump-dom").stderr)


def test_screenshot_is_not_blank(browser, page, tmp_path):
    image = pytest.importorskip("PIL.Image")
    shot = tmp_path / "report.png"
    run_browser(browser, tmp_path, page.as_uri(), f"--screenshot={shot}", "--window-size=1280,2000")
    with image.open(shot) as im:
        rgb = im.convert("RGB")
        assert rgb.size == (1280, 2000)
        colors = rgb.getcolors(maxcolors=1 << 20) or []
    total = sum(n for n, _ in colors)
    background = max(colors)[0]
    assert (total - background) / total > 0.2, "more than a fifth of the page is drawn on"
    assert len(colors) > 50
    def near(c: tuple[int, int, int], ref: tuple[int, int, int]) -> bool:
        return all(abs(a - b) < 12 for a, b in zip(c, ref, strict=True))
    # The chart colours are on screen: pass green (#2f7d43), fail red (#c0392b), line blue (#2b6cb0).
    for ref in ((0x2F, 0x7D, 0x43), (0xC0, 0x39, 0x2B), (0x2B, 0x6C, 0xB0)):
        assert sum(n for n, c in colors if near(c, ref)) > 200, ref
