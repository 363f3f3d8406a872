"""Shared fixtures: where the shared conformance corpora live."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _origin_checkout() -> Path | None:
    """The local checkout this one was cloned from (``git clone . /tmp/x``), if any."""
    try:
        url = subprocess.run(["git", "-C", str(REPO), "config", "--get", "remote.origin.url"],
                             capture_output=True, text=True, check=False, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    origin = Path(url.removeprefix("file://"))
    return origin if url and origin.is_absolute() and origin.is_dir() else None


def shared_dir() -> Path:
    """$FLEETGRADE_SHARED, or ``../shared`` next to the checkout (CI lays it there), or next to
    the local checkout it was cloned from (a scratch clone of a working copy)."""
    env = os.environ.get("FLEETGRADE_SHARED")
    candidates = [Path(env)] if env else []
    candidates += [REPO.parent / "shared", REPO.parent.parent / "shared"]
    origin = _origin_checkout()
    if origin is not None:
        candidates += [origin.parent / "shared", origin.parent.parent / "shared"]
    for c in candidates:
        if (c / "conformance").is_dir():
            return c
    raise RuntimeError(f"shared/ conformance corpora not found next to {REPO}; "
                       "set FLEETGRADE_SHARED to the folder holding conformance/")


@pytest.fixture(scope="session")
def shared() -> Path:
    return shared_dir()
