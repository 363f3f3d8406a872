"""``python -m bench.ghaw_setup [--from SOURCE]``: copy gh-aw's grader sources into ``.bench/gh-aw``.

The reference baseline (bench/reference.py) runs gh-aw's own JavaScript, which is not part of
this repository. SOURCE is a gh-aw checkout (a work tree) or a bare git directory such as a
local mirror; without ``--from``, ``$FLEETGRADE_GH_AW_SOURCE`` and then mirrors under
``/work/.mirror/github+gh-aw*`` are tried. The two grader modules are copied with every
``./*.cjs`` module they require, transitively (the ones found; bench/reference_driver.js
stands in for a missing helper and the bench reports which).
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from bench.common import BENCH_DIR

JS_DIR = "actions/setup/js"
ENTRY_POINTS = ("trace_graders.cjs", "trajectory_graders.cjs")
_REQUIRE = re.compile(r"""require\(\s*["']\./([A-Za-z0-9_.-]+\.cjs)["']\s*\)""")


def target_dir() -> Path:
    return BENCH_DIR / "gh-aw"


def _reader(source: Path) -> tuple[str, Callable[[str], bytes | None]]:
    """(description, read(name) -> bytes | None) for a work tree or a bare git directory."""
    if (source / JS_DIR).is_dir():
        def read_tree(name: str) -> bytes | None:
            path = source / JS_DIR / name
            return path.read_bytes() if path.is_file() else None
        return f"checkout {source}", read_tree
    git_dir = source / ".git" if (source / ".git").exists() else source
    if (git_dir / "HEAD").exists():
        def read_git(name: str) -> bytes | None:
            done = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"HEAD:{JS_DIR}/{name}"],
                                  capture_output=True, check=False)
            return done.stdout if done.returncode == 0 else None
        return f"git directory {git_dir}", read_git
    raise SystemExit(f"bench.ghaw_setup: not a gh-aw checkout or git directory ({source})")


def default_source() -> Path | None:
    env = os.environ.get("FLEETGRADE_GH_AW_SOURCE")
    if env:
        return Path(env)
    mirrors = sorted(glob.glob("/work/.mirror/github+gh-aw*"))
    return Path(mirrors[0]) if mirrors else None


def copy_sources(source: Path, out: Path) -> tuple[list[str], list[str]]:
    """Copy the entry points and their ``./`` requires; (copied, missing) module names."""
    what, read = _reader(source)
    shutil.rmtree(out, ignore_errors=True)  # no module left over from another checkout
    out.mkdir(parents=True)
    pending = list(ENTRY_POINTS)
    copied: list[str] = []
    missing: list[str] = []
    while pending:
        name = pending.pop(0)
        if name in copied or name in missing:
            continue
        data = read(name)
        if data is None:
            missing.append(name)
            continue
        (out / name).write_bytes(data)
        copied.append(name)
        pending += _REQUIRE.findall(data.decode("utf-8", "replace"))
    print(f"copied {len(copied)} modules from {what} into {out}")
    return copied, missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ghaw_setup")
    parser.add_argument("--from", dest="source", help="a gh-aw checkout or git directory")
    args = parser.parse_args(argv)
    source = Path(args.source) if args.source else default_source()
    if source is None:
        print("bench.ghaw_setup: no gh-aw source (give --from, or set FLEETGRADE_GH_AW_SOURCE)", file=sys.stderr)
        return 1
    _, missing = copy_sources(source, target_dir())
    if any(name in missing for name in ENTRY_POINTS):
        print(f"bench.ghaw_setup: {', '.join(n for n in ENTRY_POINTS if n in missing)} not found in {source}",
              file=sys.stderr)
        return 1
    if missing:
        print(f"not found (the driver stands in for them): {', '.join(missing)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
