"""Read-only sequences that stand for JSON arrays: compare equal to lists, pickle compactly.

The trace's large collections are kept as columns or source lines (``lazyjson``); JavaScript
semantics (``jscompat``) treat every ``LazyList`` as an array.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload


class LazyList(Sequence[Any]):
    """Shared behaviour: list equality, a list repr, and materialization."""

    __slots__ = ()

    def _get(self, index: int) -> Any:
        """The element at ``index``, which is within range."""
        raise NotImplementedError

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self._get(i) for i in range(len(self))[index]]
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"{type(self).__name__} index out of range")
        return self._get(index)

    def materialize(self) -> list[Any]:
        return list(self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, LazyList)):
            return len(self) == len(other) and self.materialize() == list(other)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # type: ignore[assignment]  # mutable-list semantics: unhashable

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.materialize()!r})"


def positions(values: list[Any], value: Any) -> Iterator[int]:
    """Indices of ``value`` in ``values`` (a column), found by ``list.index``: a C scan per hit."""
    i = -1
    try:
        while True:
            i = values.index(value, i + 1)
            yield i
    except ValueError:
        return


class SafeInts(list[int]):
    """A column whose values are all ints within ±(2**53 - 1), an absent field read as 0.

    Preprocessing builds one where every record decoded so (``records.TokenInts``), and a
    reader may then sum and compare the column in C instead of testing each value.
    """

    __slots__ = ()


def known_safe_ints(column: list[Any]) -> bool:
    """The column is known to hold only ints within ±(2**53 - 1) (preprocessing checked them as
    it parsed), so it may be summed and compared in C without testing each value."""
    return type(column) is SafeInts


class TokenSteps(LazyList):
    """The trace's ``steps``: ``{index, inputTokens, outputTokens, durationMs, model}`` per entry."""

    __slots__ = ("durations", "inputs", "models", "outputs")

    def __init__(self, inputs: list[Any], outputs: list[Any], durations: list[Any], models: list[Any]) -> None:
        self.inputs, self.outputs, self.durations, self.models = inputs, outputs, durations, models

    def __len__(self) -> int:
        return len(self.inputs)

    def _get(self, i: int) -> dict[str, Any]:
        return {"index": i, "inputTokens": self.inputs[i], "outputTokens": self.outputs[i],
                "durationMs": self.durations[i], "model": self.models[i]}

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return map(self._get, range(len(self)))

    def __reduce__(self) -> tuple[Any, ...]:
        return (TokenSteps, (self.inputs, self.outputs, self.durations, self.models))
