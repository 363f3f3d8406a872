"""Work on the next elements of a bundle started while one is processed (object storage: a
round trip that can be overlapped is never waited for by a core).

A DoFn holds an ``Ahead``: ``push`` starts an element's work (``start``, e.g. listing a run and
fetching its files in threads) and gives back the elements that are more than ``depth`` behind,
to be finished in order; ``finish_bundle`` drains the rest, whose outputs ``windowed`` puts in
their element's window (a DoFn's ``finish_bundle`` yields windowed values).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

import apache_beam as beam
from apache_beam.utils.windowed_value import WindowedValue

T = TypeVar("T")


class Ahead(Generic[T]):
    def __init__(self, depth: int, start: Callable[[T], Any]) -> None:
        self.depth = depth
        self.start = start
        self.held: deque[tuple[T, Any, Any, Any]] = deque()  # (element, its work, timestamp, window)

    def push(self, element: T, timestamp: Any, window: Any) -> Iterator[tuple[T, Any]]:
        """Start ``element``'s work; the elements now ``depth`` behind it, with their work."""
        self.held.append((element, self.start(element), timestamp, window))
        while len(self.held) > self.depth:
            element, work, _, _ = self.held.popleft()
            yield element, work

    def drain(self) -> Iterator[tuple[T, Any, Any, Any]]:
        """Every element still held, in order: (element, work, timestamp, window)."""
        while self.held:
            yield self.held.popleft()


def windowed(value: Any, timestamp: Any, window: Any) -> Any:
    """An output of ``finish_bundle``, in the window of the element it came from."""
    if isinstance(value, beam.pvalue.TaggedOutput):
        return beam.pvalue.TaggedOutput(value.tag, WindowedValue(value.value, timestamp, (window,)))
    return WindowedValue(value, timestamp, (window,))
