"""A cgroup v2 per evaluator sandbox: total memory, process count and CPU for the whole sandbox.

Per-process RLIMITs bound each process, not their sum; a cgroup bounds the sum in the kernel.
A sandbox cgroup is made under a *parent* whose ``cgroup.subtree_control`` already enables the
``memory`` and ``pids`` controllers (a delegated subtree, e.g. one made by the service manager
for fleetgrade, or given explicitly with ``SandboxOptions.cgroup_parent``). Where no such parent
exists (cgroup v1 hosts, containers with a read-only cgroupfs) the sandbox falls back to RLIMITs
plus a memory watchdog (see sandbox.py). A parent that is given or found but refuses a child is
an error: the sandbox fails closed rather than running without the limits it was promised.
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from graders.families.opvalue.errors import SandboxUnavailableError

CGROUP2_MAGIC: Final = 0x63677270
REQUIRED: Final = ("memory", "pids")
_counter = itertools.count()


def _cgroup2_mount() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted in this mount namespace, if anywhere."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                if right.split(" ", 1)[0] == "cgroup2":
                    return Path(left.split(" ")[4].replace("\\040", " "))
    except OSError:
        return None
    return None


def _enabled(parent: Path) -> set[str]:
    try:
        return set((parent / "cgroup.subtree_control").read_text().split())
    except OSError:
        return set()


def find_parent(explicit: str | None) -> Path | None:
    """The delegated parent for sandbox cgroups: ``explicit`` if given, else our own cgroup if usable."""
    if explicit:
        parent = Path(explicit)
        missing = [c for c in REQUIRED if c not in _enabled(parent)]
        if missing:
            raise SandboxUnavailableError(
                f"operational-value sandbox unavailable: cgroup {parent} does not delegate the "
                f"{' and '.join(missing)} controller(s)"
            )
        return parent
    mount = _cgroup2_mount()
    if mount is None:
        return None
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    own = next((line[3:] for line in lines if line.startswith("0::")), None)
    if own is None or own.endswith(" (deleted)"):
        return None
    parent = mount / own.lstrip("/")
    if all(c in _enabled(parent) for c in REQUIRED) and os.access(parent, os.W_OK):
        return parent
    return None


@dataclass
class SandboxCgroup:
    """One sandbox's cgroup: made with its limits, joined by the sandbox, killed and removed after."""

    path: Path
    remove_wait_s = 5.0

    @classmethod
    def create(cls, parent: Path, memory_bytes: int, max_processes: int, cpus: float | None) -> SandboxCgroup:
        path = parent / f"fleetgrade-sandbox-{os.getpid()}-{next(_counter)}"
        try:
            path.mkdir(mode=0o755)
        except OSError as exc:
            raise SandboxUnavailableError(f"operational-value sandbox unavailable: cannot create cgroup {path}: {exc}") from exc
        group = cls(path)
        try:
            group._write("memory.max", str(memory_bytes))
            if (path / "memory.swap.max").exists():
                group._write("memory.swap.max", "0")
            if (path / "memory.oom.group").exists():
                group._write("memory.oom.group", "1")  # an OOM ends the whole evaluator, not a random part
            group._write("pids.max", str(max_processes))
            if cpus is not None and (path / "cpu.max").exists():
                group._write("cpu.max", f"{max(int(cpus * 100_000), 1000)} 100000")
        except SandboxUnavailableError:
            group.remove()
            raise
        return group

    def _write(self, name: str, value: str) -> None:
        try:
            (self.path / name).write_text(value)
        except OSError as exc:
            raise SandboxUnavailableError(
                f"operational-value sandbox unavailable: cannot set {name} on cgroup {self.path}: {exc}"
            ) from exc

    @property
    def procs_file(self) -> str:
        return str(self.path / "cgroup.procs")

    def oom_killed(self) -> bool:
        try:
            text = (self.path / "memory.events").read_text()
        except OSError:
            return False
        counts = dict(line.split() for line in text.splitlines() if len(line.split()) == 2)
        return any(counts.get(key, "0") not in ("", "0") for key in ("oom", "oom_kill"))

    def remove(self) -> None:
        """Kill anything left in the cgroup and remove it (its processes take a moment to go)."""
        kill = self.path / "cgroup.kill"
        if kill.exists():
            try:
                kill.write_text("1")
            except OSError:
                pass
        deadline = time.monotonic() + self.remove_wait_s
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() >= deadline:
                    return
                time.sleep(0.02)
