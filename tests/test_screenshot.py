"""The README's screenshot (docs/img/report.png) shows the report `make demo` writes today.

`make screenshot` renders it with tools/screenshot.py and records the SHA-256 of the HTML beside
it (docs/img/report.sha256). The report is deterministic, so rendering the demo's report again
and comparing digests tells whether the picture is stale, with no browser needed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.helpers.demo import demo_root, makefile_lines, run_fleetgrade
from tests.pipeline.report_fixtures import build_rows, write_output
from tools.screenshot import DIGEST, SIZE, find_browser, html_digest, main

__all__ = ["demo_root"]  # the fixture
PNG = REPO / "docs" / "img" / "report.png"


def recorded() -> str:
    return (REPO / DIGEST).read_text(encoding="utf-8").split()[0]


def test_the_screenshot_shows_the_demo_report_of_today(demo_root: Path, tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    done = run_fleetgrade(["report", "demo-output", "--html", str(html)], demo_root)
    assert done.returncode == 0, done.stderr
    assert html_digest(html.read_bytes()) == recorded(), (
        "docs/img/report.png shows another report than `make demo` writes now: run `make screenshot` "
        "and commit docs/img/report.png and docs/img/report.sha256")


def test_the_readme_shows_it_and_make_screenshot_makes_it() -> None:
    assert "](docs/img/report.png)" in (REPO / "README.md").read_text(encoding="utf-8")
    image = pytest.importorskip("PIL.Image")
    with image.open(PNG) as im:
        assert im.size == SIZE
    assert any("tools.screenshot $(OUT)/report.html docs/img/report.png" in ln for ln in makefile_lines("screenshot"))


def test_the_tool_writes_the_picture_and_the_digest_of_its_source(tmp_path: Path) -> None:
    if find_browser() is None:
        pytest.skip("chromium is not installed (make system-deps installs it)")
    image = pytest.importorskip("PIL.Image")
    out = write_output(tmp_path / "out", build_rows(runs_per_day=1, days=3, hostile=False))
    html = tmp_path / "report.html"
    assert run_fleetgrade(["report", str(out), "--html", str(html)], tmp_path).returncode == 0
    png, digest = tmp_path / "shot.png", tmp_path / "shot.sha256"
    assert main([str(html), str(png), "--digest", str(digest)]) == 0
    assert digest.read_text(encoding="utf-8") == f"{html_digest(html.read_bytes())}  report.html\n"
    with image.open(png) as im:
        assert im.size == SIZE
        colors = im.convert("RGB").getcolors(maxcolors=1 << 20) or []
    assert len(colors) > 20, "a page was drawn, not a blank"
