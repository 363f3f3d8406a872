"""The README's screenshot of the demo report (``make screenshot``), and the record of its source.

    python -m tools.screenshot demo-output/report.html docs/img/report.png

Headless Chromium (installed by ``tools/system_deps.py``) renders the report offline into the PNG,
and ``docs/img/report.sha256`` records the SHA-256 of the HTML it was rendered from. The report
is deterministic, so ``tests/test_screenshot.py`` renders the demo's report again and fails when
its digest differs: the picture no longer shows what `make demo` gives.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
# Offline and quiet: no network, no first-run or background work, console messages on stderr.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--enable-logging=stderr", "--v=0", "--hide-scrollbars")
SIZE = (1280, 1500)  # the headline with its regression charts and the daily pass rates
DIGEST = Path("docs/img/report.sha256")


def find_browser() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def browse(browser: str, url: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Chromium on ``url`` with a throwaway profile (no state carried between runs)."""
    return subprocess.run([browser, *FLAGS, f"--user-data-dir={profile}", *args, url],
                          capture_output=True, text=True, timeout=120, check=True)


def html_digest(html: bytes) -> str:
    return hashlib.sha256(html).hexdigest()


def record(html: Path) -> str:
    """The digest line written beside the PNG (sha256sum's format, the source's name only)."""
    return f"{html_digest(html.read_bytes())}  {html.name}\n"


def screenshot(html: Path, png: Path, digest: Path) -> None:
    browser = find_browser()
    if browser is None:
        raise SystemExit("screenshot: chromium is not installed (make system-deps installs it)")
    png.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fleetgrade-shot-") as tmp:
        shot = Path(tmp) / "report.png"
        browse(browser, html.resolve().as_uri(), Path(tmp) / "profile", f"--screenshot={shot}",
               f"--window-size={SIZE[0]},{SIZE[1]}")
        png.write_bytes(shot.read_bytes())
    digest.write_text(record(html), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.screenshot", description=__doc__.splitlines()[0])
    parser.add_argument("html", type=Path, help="the report to render (make demo's demo-output/report.html)")
    parser.add_argument("png", type=Path, help="the picture to write (docs/img/report.png)")
    parser.add_argument("--digest", type=Path, default=DIGEST, help=f"the source's digest record (default {DIGEST})")
    args = parser.parse_args(argv)
    screenshot(args.html, args.png, args.digest)
    print(f"{args.png} ({args.digest}: {args.digest.read_text(encoding='utf-8').split()[0][:12]}…)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
