"""A partition's chunked table as read per query: held chunks from the cache, the rest at once.

Why one class: every lazily read table (vocabulary, exact keys, graph edges, typo words) looks
its keys up the same way — find each key's chunk in the resident directory, take the decoded
chunks the isolate holds, fetch the others concurrently (one round trip), decode and keep them —
and reports the same costs. Sans-I/O: ``fetch`` is the package's verified chunk reader.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from router.lru import LruCache
from router.package.stores.cost import ReadCost
from router.package.stores.texts import ChunkFetcher
from router.sync import concurrently

__all__ = ["ChunkStore"]

T = TypeVar("T")
K = TypeVar("K", str, int)
V = TypeVar("V")


class ChunkStore(Generic[T]):
    """One partition's chunk files (``<key>.<name>``), decoded by ``decode`` and kept in the
    package's cache of decoded chunks, each weighing its bytes read times the store's
    ``decoded_per_byte`` (what a decoded chunk holds per byte of its file, measured)."""

    decoded_per_byte: float = 1.0

    def __init__(
        self,
        key: str,
        file_name: Callable[[int], str],
        fetch: ChunkFetcher,
        cache: LruCache[str, T],
    ) -> None:
        self.key = key
        self._file_name = file_name
        self._fetch = fetch
        self._cache = cache

    def file(self, chunk: int) -> str:
        return f"{self.key}.{self._file_name(chunk)}"

    def decode(self, chunk: int, blob: bytes) -> T:
        """Chunk ``chunk`` from its (verified) bytes; a malformed one raises
        ``PackageFormatError``."""
        raise NotImplementedError

    def weight(self, blob: bytes) -> int:
        """The bytes a decoded chunk of ``blob`` is accounted in the cache."""
        return int(len(blob) * self.decoded_per_byte)

    async def read(
        self, chunks: Iterable[int | None], looked_up: int
    ) -> tuple[dict[int, T], ReadCost]:
        """The decoded chunks of ``chunks`` (None: no chunk, skipped) by number, and what
        reading them cost for ``looked_up`` keys (the chunks not held, fetched concurrently)."""
        held: dict[int, T] = {}
        missing: list[int] = []
        for chunk in sorted({c for c in chunks if c is not None}):
            found = self._cache.get(self.file(chunk))
            if found is None:
                missing.append(chunk)
            else:
                held[chunk] = found
        blobs = await concurrently([self._fetch(self.file(chunk)) for chunk in missing])
        for chunk, blob in zip(missing, blobs, strict=True):
            held[chunk] = self.decode(chunk, blob)
            self._cache.put(self.file(chunk), held[chunk], self.weight(blob))
        cost = ReadCost(looked_up, len(blobs), sum(map(len, blobs)), 1 if blobs else 0)
        return held, cost

    async def lookup(
        self,
        keys: Iterable[K],
        chunk_of: Callable[[K], int | None],
        pick: Callable[[T, K], V],
        absent: Callable[[], V],
    ) -> tuple[dict[K, V], ReadCost]:
        """Each distinct key's value — ``pick(chunk, key)`` from the chunk the directory names
        (``chunk_of``), ``absent()`` where none does — and what reading them cost (the chunks
        not held, fetched concurrently: one round trip)."""
        wanted = sorted(set(keys))
        where = {key: chunk_of(key) for key in wanted}
        held, cost = await self.read(where.values(), len(wanted))
        found = {
            key: absent() if chunk is None else pick(held[chunk], key)
            for key, chunk in where.items()
        }
        return found, cost
