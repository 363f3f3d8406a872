"""``python -m bench.ghaw_setup [--from SOURCE]``: copy gh-aw's grader sources into ``.bench/gh-aw``.

The reference baseline (bench/reference.py) runs gh-aw's own JavaScript, which is not part of
this repository. SOURCE is a gh-aw checkout (a work tree) or a bare git directory such as a
local mirror; without ``--from``, ``$FLEETGRADE_GH_AW_SOURCE`` and then mirrors under
``/work/.mirror/github+gh-aw*`` are tried; SOURCE may also be a folder holding the modules
themselves. The two grader modules are copied with every ``./*.cjs`` module they require,
transitively (the ones found; bench/reference_driver.js stands in for a missing helper and the
bench reports which). The copies are checked against ``bench/gh-aw-sources.json``, the digests
of the sources the figures in docs/performance.md were measured with.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
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
RECORDED = Path(__file__).with_name("gh-aw-sources.json")
_REQUIRE = re.compile(r"""require\(\s*["']\./([A-Za-z0-9_.-]+\.cjs)["']\s*\)""")


def target_dir() -> Path:
    return BENCH_DIR / "gh-aw"


def _reader(source: Path) -> tuple[str, Callable[[str], bytes | None]]:
    """(description, read(name) -> bytes | None) for a work tree or a bare git directory."""
    for folder, what in ((source / JS_DIR, "checkout"), (source, "folder")):
        if all((folder / name).is_file() for name in ENTRY_POINTS) or (what == "checkout" and folder.is_dir()):
            def read_tree(name: str, folder: Path = folder) -> bytes | None:
                path = folder / name
                return path.read_bytes() if path.is_file() else None
            return f"{what} {source}", read_tree
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


def recorded_status(folder: Path) -> str:
    """Whether the modules in ``folder`` are the copies ``bench/gh-aw-sources.json`` records."""
    files: dict[str, dict[str, object]] = json.loads(RECORDED.read_text())["files"]
    differ = []
    for name, recorded in files.items():
        path = folder / name
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        if digest != recorded["sha256"]:
            differ.append(name)
    if not differ:
        return "the recorded copies (bench/gh-aw-sources.json)"
    return f"not the recorded copies: {', '.join(differ)} differ from bench/gh-aw-sources.json"


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
    print(f"sources: {recorded_status(target_dir())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
