"""One reusable buffer for the large posting shards a query reads (the Worker's shard arena).

Why: a wasm heap never shrinks, and it fragments. Measured in the 1M Worker (bench/README.md,
"session 8"), every query that read a few MB of shards left the allocator's high-water mark a
little higher — 75 → 104 MiB over 958 queries — although what the isolate holds between
queries stayed flat (CPython's tracemalloc: +1.2 MiB from query 200 to 900). Capping the bytes
a query reads did not stop it (101 MiB with at most 4.5 MB a query): the creep comes from
allocating and freeing multi-megabyte blocks, between which longer-lived objects settle. So
the large shards of a query are copied straight from the store's buffer (R2's ``ArrayBuffer``)
into one ``bytearray`` the isolate keeps, and decoded in place; the next query reuses it. Small
shards stay ordinary ``bytes`` and may be cached between queries; arena shards never outlive the
query that read them (their lease).

Sans-I/O: a store that can copy into a given buffer (``BlobStore.get_into``) asks the lease's
``allocate(size)`` for a slice; ``None`` means "allocate it yourself" (the shard is small, the
arena is full, or another query holds it — queries of one isolate may interleave).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ArenaLease", "ShardArena"]

MIB = 1024 * 1024


@dataclass
class ArenaLease:
    """One query's use of the arena: the slices it handed out."""

    arena: ShardArena
    used: int = 0  # bytes handed out, from the start of the buffer
    wanted: int = 0  # bytes asked for by large shards (handed out or not)

    def allocate(self, size: int) -> memoryview | None:
        """A writable slice of ``size`` bytes for a large shard, or None."""
        return self.arena.slice_for(self, size)

    def holds(self, blob: object) -> bool:
        """Whether ``blob`` lives in the arena (a slice this lease handed out)."""
        return isinstance(blob, memoryview) and blob.obj is self.arena.buffer


class ShardArena:
    """The buffer, grown to the largest query's large shards (up to ``max_bytes``) and kept."""

    def __init__(self, max_bytes: int, min_shard_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.min_shard_bytes = min_shard_bytes
        self.buffer = bytearray()
        self._lease: ArenaLease | None = None

    def lease(self) -> ArenaLease | None:
        """The arena for one query, or None while another query holds it (or it is off)."""
        if self._lease is not None or self.max_bytes <= 0:
            return None
        self._lease = ArenaLease(self)
        return self._lease

    def slice_for(self, lease: ArenaLease, size: int) -> memoryview | None:
        if lease is not self._lease or size < self.min_shard_bytes:
            return None
        lease.wanted += size
        if lease.used + size > len(self.buffer):
            return None
        start, lease.used = lease.used, lease.used + size
        return memoryview(self.buffer)[start : lease.used]

    def release(self, lease: ArenaLease) -> None:
        """End a query's lease. When its large shards did not all fit, the next query gets a
        buffer that would have held them (whole MiBs, at most ``max_bytes``): a new one, as the
        old cannot be resized while the query's views of it may live; it grows a few times in
        an isolate's life, never shrinks."""
        if lease is not self._lease:
            return
        self._lease = None
        wanted = min(self.max_bytes, -(-lease.wanted // MIB) * MIB)
        if wanted > len(self.buffer):
            self.buffer = bytearray(wanted)
