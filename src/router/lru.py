"""A bounded mapping that forgets the least recently used entry first (caches of the isolate).

Why one class: the query cache, the decoded record and exact-key caches of a package all need
the same few lines, and each is bounded so that no sequence of requests grows the isolate.
An entry may weigh more than one (its bytes, as the caller accounts them): the capacity is
then a byte budget, and a budget in bytes is honest when entries differ in size (a decoded
vocabulary chunk of 40 KiB, a record of 2 KiB).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["LruCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LruCache(Generic[K, V]):
    """Entries whose weights add up to at most ``capacity`` (each weighs 1 unless ``put``
    says otherwise: then ``capacity`` counts entries); reading or writing one makes it the
    most recent."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._held = 0

    def __len__(self) -> int:
        return len(self._items)

    @property
    def held(self) -> int:
        """The weight of the entries held (their bytes, for a cache whose entries weigh that)."""
        return self._held

    def get(self, key: K) -> V | None:
        found = self._items.get(key)
        if found is None:
            return None
        self._items.move_to_end(key)
        return found[0]

    def put(self, key: K, value: V, weight: int = 1) -> None:
        """Hold ``value`` (weighing ``weight``), then drop the least recently used past the
        capacity — this one too when it alone exceeds it (a capacity of 0 keeps nothing)."""
        old = self._items.pop(key, None)
        if old is not None:
            self._held -= old[1]
        self._items[key] = (value, weight)
        self._held += weight
        self._trim()

    def resize(self, capacity: int) -> None:
        """A new capacity (the isolate's room for its caches changed): past it, the least
        recently used are dropped now."""
        self.capacity = capacity
        self._trim()

    def _trim(self) -> None:
        while self._held > self.capacity and self._items:
            _, (_, weight) = self._items.popitem(last=False)
            self._held -= weight
