"""What an isolate keeps of a loaded package between queries: the bound of every cache, in bytes.

Why one object (docs/adr/0010, "the reader"): a Worker isolate has 128 MB for everything —
the runtime, the app (≈ 52 MiB of wasm heap with FastAPI and pydantic), the package's resident
directories, and these caches — and a wasm heap never shrinks, so the caches' peak is what
counts. Why bytes, and why from the heap's headroom (issue 32, item 4): fixed small caps kept
the 100k isolate re-reading most of what a question needs (18 % of the bench's questions asked
again made no read), although the heap had room for all of it; at 1M the same caps were too
much. So the Worker reads how much of its heap is in use, ``HeapRoom`` turns that into the
bytes the caches may hold, and ``ReaderBudget.for_headroom`` splits them among the caches. Each
cache accounts its entries in bytes (decoded size, estimated from the bytes read by the
``DECODED_PER_BYTE`` factor of its store), so a budget in bytes means what it says. A server
with memory to spare (``kr serve``) passes a large budget.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from router.checks import check_count, check_order

__all__ = [
    "HEAP_LIMIT_BYTES",
    "HEAP_RESERVE_BYTES",
    "MIB",
    "RESERVE_PER_SECTION",
    "VIEW_BYTES",
    "HeapPlan",
    "HeapRoom",
    "ReaderBudget",
]

MIB = 1024 * 1024
HEAP_LIMIT_BYTES = 108 * MIB
"""The most a Worker's wasm heap in use may reach: the heap grows in steps of up to 20 %
(… 75 → 90 → 108 → 129.5 MiB), and the step past 108 MiB is past the isolate's 128 MB; what
stays (≈ 15 MB) is the JS runtime's around Pyodide. A stricter plan (``KR_HEAP_LIMIT_MIB=90``:
a heap of 90 MiB, the issue's 96 MiB target) gives the caches 18 MiB less."""
HEAP_RESERVE_BYTES = 8 * MIB
"""Kept free below the limit for what one query allocates and frees, at least…"""
RESERVE_PER_SECTION = 30
"""…and per section of the package: what one query allocates grows with the sections (a long
posting list is one shard of several MB, its bounds a byte a section). Measured: ≤ 4 MiB a query
above what the isolate holds at 100k, up to 16 MiB at 1M (CPython, tracemalloc, session 7), and
the 1M Worker's heap crept 75 → 104 MiB over 958 questions with ≈ 10 MiB of caches
(bench/README, "Scale"). Since a query reads a long list past its budget as a head page
(docs/adr/0029), what it allocates at 1M is bounded by that budget: with 40 bytes a section the
1M heap ended at 74.9 MiB, 4.4 MiB over the 70 MiB ceiling. So at 1M 28.6 MiB stay free and
the caches get ≈ 9 MiB more than before (a heap of 90 MiB, the step under the 96 MiB target);
at 100k 8 MiB do."""

# Shares of the room, as what the caches held after the bench's 263 questions at 100k, every cache
# unbounded, in the Worker's accounting (each store's DECODED_PER_BYTE; 2026-12-05, bench/README
# "A warm isolate"): posting shards 15.3 MB, section texts 5.7, the tables 15.6 (exact keys 4.9,
# vocabulary 4.7, record JSON 3.3 for 2,272 records, graph 2.3, typo words 0.5), bounds 2.1,
# composed views 2.0 (12), tenant partitions 0.2 — 40.9 MB; the decoded records get 4 % on top.
_SHARES = {
    "shard_bytes": 0.358,
    "table_bytes": 0.367,
    "chunk_bytes": 0.134,
    "bound_bytes": 0.049,
    "record_bytes": 0.04,
    "partition_bytes": 0.006,
}
_VIEWS_SHARE = 0.046
VIEW_BYTES = 160 * 1024
"""What a composed view holds (its analyzer's stem cache, its derived indexes): 1.9 MiB for 12
views at 100k (CPython)."""
MAX_VIEWS = 64


@dataclass(frozen=True)
class ReaderBudget:
    """Bounds of the per-package caches (bytes, unless named otherwise; 0 keeps nothing between
    queries). The defaults are the small fixed caps an isolate uses until it knows its heap."""

    shard_bytes: int = 2 * MIB  # decoded posting shards (≈ 32 shards of 64 KiB)
    bound_bytes: int = 2 * MIB  # the scorer's per-section bounds of long lists (a byte a section)
    chunk_bytes: int = 1 * MIB  # raw text and record chunks
    record_bytes: int = 5 * MIB // 8  # decoded document records (≈ 190 of 3.5 KiB)
    # one LRU for the decoded chunks of the exact keys, the vocabulary, the graph and the typo
    # words, and the records' JSON (decoded again when asked): ≈ 48, 96, 32 and 32 chunks before
    table_bytes: int = 9 * MIB // 2
    partition_bytes: int = 1 * MIB  # tenant partitions' resident files held (read again later)
    stem_words: int = 2048  # words whose stems each view's analyzer remembers (a count)
    views: int = 8  # tenant views kept composed (a count)
    arena_bytes: int = (
        0  # the shard arena's largest size (off: at 1M it ended the heap at 130 MiB, not 108)
    )
    arena_min_shard_bytes: int = 256 * 1024  # a shard this large is read into the arena

    def __post_init__(self) -> None:
        for item in fields(self):
            check_count("ReaderBudget", item.name, getattr(self, item.name), 0)

    @classmethod
    def for_headroom(cls, room: int) -> ReaderBudget:
        """A budget whose caches hold at most ``room`` bytes in all (one composed view at
        least), split by the shares the bench's questions used (``_SHARES``)."""
        room = max(0, room)
        views = max(1, min(MAX_VIEWS, int(room * _VIEWS_SHARE) // VIEW_BYTES))
        rest = max(0, room - views * VIEW_BYTES)
        whole = sum(_SHARES.values())
        split = {name: int(rest * share / whole) for name, share in _SHARES.items()}
        return cls(**split, views=views)

    @property
    def cache_bytes(self) -> int:
        """The bytes of every cache this budget bounds (what ``for_headroom`` splits)."""
        return sum(getattr(self, name) for name in _SHARES) + self.views * VIEW_BYTES


@dataclass(frozen=True)
class HeapPlan:
    """How far the isolate's heap may grow (``limit_bytes``) and what stays free below it for
    one query's own allocations (``reserve_bytes``)."""

    limit_bytes: int = HEAP_LIMIT_BYTES
    reserve_bytes: int = HEAP_RESERVE_BYTES
    reserve_per_section: int = RESERVE_PER_SECTION

    def __post_init__(self) -> None:
        check_count("HeapPlan", "limit_bytes", self.limit_bytes, 1)
        check_count("HeapPlan", "reserve_bytes", self.reserve_bytes, 0)
        check_count("HeapPlan", "reserve_per_section", self.reserve_per_section, 0)
        check_order(
            "HeapPlan", ("limit_bytes", "reserve_bytes"), (self.limit_bytes, self.reserve_bytes)
        )

    def ceiling(self, sections: int) -> int:
        """The heap in use the caches must not push past, for a package of ``sections``."""
        reserve = max(self.reserve_bytes, self.reserve_per_section * sections)
        return max(0, self.limit_bytes - reserve)


class HeapRoom:
    """The bytes one package's caches may hold, from readings of the heap in use (a wasm heap's
    break: it never goes down).

    At the first reading (the package just loaded, its caches empty) the room is what is left
    below the plan's ceiling. Later, only a heap that went past the ceiling shrinks it — by
    the overshoot, counted once (the caches give back what a large query or a newly read
    tenant partition took; the bytes they free are reused, so the heap stops growing). A
    reading below the ceiling changes nothing: the caches filling their room is what raised it.
    """

    def __init__(self, plan: HeapPlan, heap_bytes: int, sections: int) -> None:
        self.ceiling = plan.ceiling(sections)
        self.start = heap_bytes
        self.highest = heap_bytes

    def room(self, heap_bytes: int) -> int:
        """The caches' room after a reading of the heap in use."""
        self.highest = max(self.highest, heap_bytes)
        ceiling = self.ceiling
        return max(0, ceiling - self.start - max(0, self.highest - max(ceiling, self.start)))
