"""Two sequences read as one, without copying: how a view shows a shared and a tenant partition.

Why: a tenant's view is the shared partition followed by its own; copying the shared lists into
every tenant's view would cost the shared partition's size once per tenant in the isolate.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import chain
from typing import TypeVar, overload

__all__ = ["Indexed", "Joined", "Offset"]

T = TypeVar("T")


class Indexed(Sequence[T]):
    """A sequence defined by its length and ``_item(index)`` (a valid index ≥ 0): slicing,
    negative indices, bounds and iteration are here, once."""

    __slots__ = ()

    def _item(self, index: int) -> T:
        raise NotImplementedError

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return [self._item(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._item(index)

    def __iter__(self) -> Iterator[T]:
        return (self._item(i) for i in range(len(self)))


class Joined(Indexed[T]):
    """``first`` then ``second``, indexed as one sequence."""

    __slots__ = ("_first", "_second", "_split")

    def __init__(self, first: Sequence[T], second: Sequence[T]) -> None:
        self._first = first
        self._second = second
        self._split = len(first)

    def __len__(self) -> int:
        return self._split + len(self._second)

    def _item(self, index: int) -> T:
        split = self._split
        return self._first[index] if index < split else self._second[index - split]

    def __iter__(self) -> Iterator[T]:
        return chain(self._first, self._second)


class Offset(Indexed[int]):
    """A sequence of numbers shifted by a constant (a tenant partition's local document numbers
    as view numbers)."""

    __slots__ = ("_by", "_values")

    def __init__(self, values: Sequence[int], by: int) -> None:
        self._values = values
        self._by = by

    def __len__(self) -> int:
        return len(self._values)

    def _item(self, index: int) -> int:
        return self._values[index] + self._by
