"""Which TCP ports processes listen on, from ``ss -ltnp``: every server a test starts (Dask's,
Beam's gRPC servers) must listen on loopback only."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psutil

LOOPBACK = ("127.0.0.1:", "[::1]:", "[::ffff:127.0.0.1]:")


def listeners(pids: set[int]) -> list[tuple[int, str]]:
    """(pid, local address) of every listening TCP socket of these processes."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 6:
            continue
        for part in fields[5].split("pid=")[1:]:
            pid = int(part.split(",", 1)[0])
            if pid in pids:
                found.append((pid, fields[3]))
    return found


def off_loopback(found: list[tuple[int, str]]) -> list[tuple[int, str]]:
    return [(pid, addr) for pid, addr in found if not addr.startswith(LOOPBACK)]


def tree(pid: int) -> set[int]:
    """The process and its descendants (empty once it has ended)."""
    try:
        top = psutil.Process(pid)
        return {pid, *(child.pid for child in top.children(recursive=True))}
    except psutil.NoSuchProcess:
        return set()


@contextmanager
def watching(roots: Callable[[], set[int]], every: float = 0.2) -> Iterator[set[tuple[int, str]]]:
    """Every listener seen, until the block ends, in the process trees of ``roots()`` (polled:
    servers that live for one job only are caught while they run)."""
    seen: set[tuple[int, str]] = set()
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            pids = {p for root in roots() for p in tree(root)}
            if pids:
                seen.update(listeners(pids))
            done.wait(every)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        done.set()
        thread.join()
