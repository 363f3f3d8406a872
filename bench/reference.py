"""gh-aw's own graders as a baseline: preprocessing, the 10 built-ins and the 22 trajectory
graders, run warm in one Node process by bench/reference_driver.js.

The JavaScript is found in ``$FLEETGRADE_GH_AW`` (a folder holding ``trace_graders.cjs`` and
``trajectory_graders.cjs``, e.g. ``<checkout>/actions/setup/js``) or in ``.bench/gh-aw``
(filled by ``python -m bench.ghaw_setup``). Without it, or without ``node``, nothing is
measured and :func:`unavailable` says why: the bench then prints "reference not measured".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from types import TracebackType
from typing import Any

from bench.common import row
from bench.ghaw_setup import ENTRY_POINTS, recorded_status, target_dir

DRIVER = Path(__file__).with_name("reference_driver.js")


def source_dir() -> Path | None:
    env = os.environ.get("FLEETGRADE_GH_AW")
    candidates = [Path(env), Path(env) / "actions/setup/js"] if env else [target_dir()]
    for folder in candidates:
        if all((folder / name).is_file() for name in ENTRY_POINTS):
            return folder
    return None


def unavailable() -> str | None:
    """Why the reference cannot be measured here, or None when it can."""
    if shutil.which("node") is None:
        return "node is not installed"
    if source_dir() is None:
        return "no gh-aw sources (set FLEETGRADE_GH_AW, or run python -m bench.ghaw_setup --from <checkout>)"
    return None


class Reference:
    """One warm Node process grading the runs it is given; one request at a time."""

    def __init__(self) -> None:
        folder = source_dir()
        if folder is None:
            raise RuntimeError("no gh-aw sources")
        self.proc = subprocess.Popen(["node", str(DRIVER), str(folder)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)
        self.shims: list[str] = []
        self.sources = recorded_status(folder)

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the reference driver exited (status {self.proc.wait()})")
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"the reference driver: {reply['error']}")
        return reply

    def set_runs(self, folders: list[Path]) -> None:
        reply = self._ask({"runs": [str(f.resolve()) for f in folders]})
        self.shims = list(reply.get("shims", []))

    def one_pass(self) -> list[float]:
        """Seconds per run (in order) for one warm pass over the runs."""
        reply = self._ask({"pass": True})
        self.shims = list(reply.get("shims", []))
        return [ms / 1000 for ms in reply["ms"]]

    def one(self, index: int) -> float:
        """Seconds for one warm grading of run ``index`` of :meth:`set_runs`."""
        ms: float = self._ask({"one": index})["ms"]
        return ms / 1000

    def results(self, folder: Path) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = self._ask({"results": str(folder.resolve())})["results"]
        return out

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> Reference:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def reference_rows(tier: str, n: int, core_s: float, pipe_s: float, ref_s: float | None, shims: list[str],
                   why_not: str | None, sources: str = "") -> list[dict[str, Any]]:
    """The rows comparing with the reference; without a measurement, one row saying why and no number."""
    if ref_s is None:  # marked for their targets, which are then "not measured", never met
        why = f"reference not measured: {why_not or 'no measurement'}"
        return [{"name": f"tier {tier}: core / reference", "value": None, "unit": "ratio", "target": "tier-reference",
                 "note": why},
                {"name": f"tier {tier}: pipeline (1 core) / reference", "value": None, "unit": "ratio",
                 "target": "tier-pipeline-reference", "note": why}]
    stood_in = f"; gh-aw helpers stood in for: {', '.join(shims)}" if shims else ""
    return [
        row(f"tier {tier}: reference runs/s (gh-aw JS, warm, 1 process)", n / ref_s, "runs/s",
            note=f"same runs, same rounds{stood_in}" + (f"; sources: {sources}" if sources else "")),
        row(f"tier {tier}: core / reference", ref_s / core_s, "ratio", baseline=ref_s, ratio=ref_s / core_s,
            target="tier-reference"),
        row(f"tier {tier}: pipeline (1 core) / reference", ref_s / pipe_s, "ratio", baseline=ref_s,
            ratio=ref_s / pipe_s, target="tier-pipeline-reference"),
    ]
