"""Shared fixtures: where the conformance corpora live."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# The vendored corpora (tests/data/conformance/README.md): a plain clone runs every test.
VENDORED = REPO / "tests" / "data"


def shared_dir() -> Path:
    """The folder holding ``conformance/``: ``$FLEETGRADE_SHARED`` when set (another copy of the
    corpora, e.g. a newer one), else the copy vendored under ``tests/data/``."""
    env = os.environ.get("FLEETGRADE_SHARED")
    root = Path(env) if env else VENDORED
    if not (root / "conformance").is_dir():
        where = f"FLEETGRADE_SHARED={env}" if env else str(root)
        raise RuntimeError(f"conformance corpora not found: no conformance/ folder in {where}")
    return root


def conformance_dir() -> Path:
    return shared_dir() / "conformance"


@pytest.fixture(scope="session")
def shared() -> Path:
    return shared_dir()
