"""Sandboxed executors by grader source; created once per worker (``DoFn.setup``)."""

from __future__ import annotations

from graders.engine import Executor

SANDBOXED_SOURCES = ("inline", "operational-value")


def make_executor(source: str) -> Executor | None:
    """The sandbox that runs graders of ``source``, or None for in-process sources."""
    return None


def close_executor(executor: Executor | None) -> None:
    close = getattr(executor, "close", None)
    if callable(close):
        close()
