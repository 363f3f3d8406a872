"""Shared fixtures: where the shared conformance corpora live."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def shared_dir() -> Path:
    """``../shared`` next to the checkout (CI lays it there), or $FLEETGRADE_SHARED."""
    env = os.environ.get("FLEETGRADE_SHARED")
    candidates = [Path(env)] if env else []
    candidates += [REPO.parent / "shared", REPO.parent.parent / "shared"]
    for c in candidates:
        if (c / "conformance").is_dir():
            return c
    raise RuntimeError(f"shared/ conformance corpora not found next to {REPO}; "
                       "set FLEETGRADE_SHARED to the folder holding conformance/")


@pytest.fixture(scope="session")
def shared() -> Path:
    return shared_dir()
