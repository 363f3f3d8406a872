"""Combining where the inputs are, in batches of bounded size, and merging the partials after
the shuffle: for combines whose keys grow with the fleet (a cell per day, a task per scheduled
run), where Beam's lifted combine would keep every key of a bundle in one table."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

_GLOBAL = (GlobalWindow(),)


def in_global_window(value: Any) -> WindowedValue:
    """What ``finish_bundle`` yields: ``GlobalWindows.windowed_value(value)`` without making the
    global window again for each element (its constructor reads a proto constant each time)."""
    return WindowedValue(value, MIN_TIMESTAMP, _GLOBAL)


class CombineInBundle(beam.DoFn):  # type: ignore[misc]
    """(key, input) → (key, compacted accumulator of ``fn``): a bundle's inputs combined per key,
    flushed whenever ``budget`` inputs are held, so a worker holds at most a budget's worth
    whatever the fleet. Beam's lifted combine bounds its table by keys (100,000), not size, and
    held a whole first run's cells; :class:`MergeBundles` (or the consumer) merges the partials
    a key gets. ``explode`` turns each element into its (key, input) pairs first: in this step
    rather than a FlatMap before it, one Beam step fewer (each adds to a job's fixed cost)."""

    def __init__(self, fn: beam.CombineFn, budget: int,
                 explode: Callable[[Any], Iterable[tuple[Any, Any]]] | None = None) -> None:
        self.fn, self.budget, self.explode = fn, budget, explode
        self._table: dict[Any, Any] = {}
        self._held = 0

    def setup(self) -> None:
        self.fn.setup()

    def teardown(self) -> None:
        self.fn.teardown()

    def start_bundle(self) -> None:
        self._table, self._held = {}, 0

    def process(self, element: Any) -> Iterator[tuple[Any, Any]]:
        for key, value in (element,) if self.explode is None else self.explode(element):
            acc = self._table.get(key)
            self._table[key] = self.fn.add_input(self.fn.create_accumulator() if acc is None else acc, value)
            self._held += 1
            if self._held >= self.budget:
                yield from self._flush()

    def finish_bundle(self) -> Iterator[Any]:
        for kv in self._flush():
            yield in_global_window(kv)

    def _flush(self) -> Iterator[tuple[Any, Any]]:
        table, self._table, self._held = self._table, {}, 0
        for key, acc in table.items():
            yield key, self.fn.compact(acc)


class MergeBundles(beam.PTransform):  # type: ignore[misc]
    """(key, partial accumulator of ``fn``) → (key, ``fn``'s output): grouped, then merged per
    key. Not a lifted combine, whose table would hold every key's accumulator at once again."""

    def __init__(self, fn: beam.CombineFn) -> None:
        super().__init__()
        self.fn = fn

    def expand(self, partials: beam.PCollection) -> beam.PCollection:
        return partials | "Group" >> beam.GroupByKey() | "Merge" >> beam.Map(_merge, self.fn)


def _merge(kv: tuple[Any, Iterable[Any]], fn: beam.CombineFn) -> tuple[Any, Any]:
    key, partials = kv
    return key, fn.extract_output(fn.merge_accumulators(partials))
