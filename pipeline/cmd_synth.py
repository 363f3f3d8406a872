"""``fleetgrade synth``: the fleet generator of a checkout (``python -m tools.synth``).

The generator is a repository tool, not part of the installed package: this command runs the
checkout's ``tools/synth.py`` with the arguments as given, and says where to find it otherwise.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from pipeline.errors import UsageError

CHECKOUT = Path(__file__).resolve().parents[1]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    # Every token is the generator's (prefix_chars that no flag uses): it parses them itself.
    p = sub.add_parser(
        "synth", add_help=False, prefix_chars="\0",
        help="write a deterministic synthetic fleet (a checkout's python -m tools.synth)",
    )
    p.add_argument("argv", nargs="*")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    if not (CHECKOUT / "tools" / "synth.py").is_file():
        raise UsageError("the fleet generator ships with the repository, not the package: "
                         "run `python -m tools.synth` in a checkout")
    path = os.pathsep.join(p for p in (str(CHECKOUT), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.call([sys.executable, "-m", "tools.synth", *args.argv], env={**os.environ, "PYTHONPATH": path})
