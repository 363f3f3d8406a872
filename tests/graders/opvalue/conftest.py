"""Helpers for the operational-value tests: evaluator sources and a sandbox that must exist."""

from __future__ import annotations

import shutil

import pytest

from graders.families.opvalue.sandbox import SandboxOptions

SHEBANG = "#!/bin/bash\n"
# Generous limits: the tests must not depend on machine speed.
FAST = SandboxOptions(syntax_check_timeout_ms=10_000, evaluator_timeout_ms=30_000)


def evaluator(body: str) -> bytes:
    return (SHEBANG + body + "\n").encode()


@pytest.fixture
def sandbox() -> SandboxOptions:
    """Sandbox tests need bwrap (``make system-deps`` installs it); they fail, never skip, without it."""
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap (bwrap) is not installed: run `make system-deps`; the grader fails closed")
    return FAST
