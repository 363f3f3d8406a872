"""A lock store whose next compare-and-swap first lets another job move (tests of the output lock)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

S = TypeVar("S")


def racing(store: S, meanwhile: Callable[[], Any]) -> S:
    """``store``, whose next ``replace`` first runs ``meanwhile``: another job's move between this
    job's read of the lock and its conditional write."""
    replace = store.replace  # type: ignore[attr-defined]
    pending: list[Callable[[], Any]] = [meanwhile]

    def once(rel: str, data: bytes, expected: Any) -> Any:
        while pending:
            pending.pop()()
        return replace(rel, data, expected)

    store.replace = once  # type: ignore[attr-defined]
    return store
