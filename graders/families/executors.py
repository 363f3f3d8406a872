"""Sandboxed executors by grader source; created once per worker (``DoFn.setup``)."""

from __future__ import annotations

from graders.grading.engine import Executor

SANDBOXED_SOURCES = ("inline", "operational-value")


def make_executor(source: str, allow_unsandboxed: bool = False) -> Executor | None:
    """The sandbox that runs graders of ``source``, or None for in-process sources.

    Sandboxes fail closed: when one cannot be set up, its graders report an error. Only an
    explicit ``allow_unsandboxed`` (the ``--allow-unsandboxed`` flag) lifts that.
    """
    if source == "inline":
        from graders.families.inline_js.sandbox import JsSandbox

        return JsSandbox()
    if source == "operational-value":
        from graders.families.opvalue.executor import OperationalValueExecutor
        from graders.families.opvalue.sandbox import SandboxOptions

        return OperationalValueExecutor(options=SandboxOptions(allow_unsandboxed=allow_unsandboxed))
    return None


def close_executor(executor: Executor | None) -> None:
    close = getattr(executor, "close", None)
    if callable(close):
        close()
