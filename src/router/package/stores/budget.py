"""What an isolate keeps of a loaded package between queries: the bound of every cache.

Why one object (docs/adr/0010, "the reader"): a Worker isolate has 128 MB for everything —
the runtime, the app (≈ 52 MiB of wasm heap with FastAPI and pydantic), the package's resident
directories, and these caches — and a wasm heap never shrinks, so the caches' peak is what
counts. Measured at 100k sections (bench/README.md, "format 3 step 4"), the former defaults held
≈ 37 MiB after the benchmark's queries; these hold ≈ 13. A server with memory to spare (``kr
serve``) may pass a larger budget.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from router.checks import check_count

__all__ = ["ReaderBudget"]

MIB = 1024 * 1024


@dataclass(frozen=True)
class ReaderBudget:
    """Bounds of the per-package caches (bytes or entries; 0 keeps nothing between queries)."""

    shard_bytes: int = 2 * MIB  # decoded posting shards (≈ 32 shards of 64 KiB)
    bound_bytes: int = 2 * MIB  # the scorer's per-section bounds of long lists (a byte a section)
    chunk_bytes: int = 1 * MIB  # raw text and record chunks
    records: int = 192  # decoded document records
    exact_tables: int = 48  # decoded exact-key chunks (≈ 16 KiB each)
    vocabulary_chunks: int = 96  # decoded vocabulary chunks (≈ 16 KiB each)
    graph_chunks: int = 32  # decoded edge chunks
    word_chunks: int = 32  # decoded typo-word chunks
    stem_words: int = 2048  # words whose stems each view's analyzer remembers
    views: int = 8  # tenant views kept composed
    tenant_partitions: int = 4  # tenant partitions held (read again on a later question)
    arena_bytes: int = (
        0  # the shard arena's largest size (off: at 1M it ended the heap at 130 MiB, not 108)
    )
    arena_min_shard_bytes: int = 256 * 1024  # a shard this large is read into the arena

    def __post_init__(self) -> None:
        for item in fields(self):
            check_count("ReaderBudget", item.name, getattr(self, item.name), 0)
