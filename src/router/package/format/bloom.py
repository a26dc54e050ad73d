"""A Bloom filter over a partition's terms: "may this string be a term?" without the terms.

Why (index format 3, docs/adr/0010): typo repair checks ~50 × length candidate spellings of an
unknown term against the vocabulary, and at a million sections the vocabulary is read per query
in chunks (``router.package.stores.vocabulary``); fetching the chunk of every candidate would cost
hundreds of reads. The filter answers for all of them from a few bits per term held resident
(``BITS_PER_TERM`` ≈ 1 % false positives), so only the chunks of the few candidates it lets
through are read — and those reads decide.

The positions of a key are ``(h1 + i·h2) mod m`` for i < k (Kirsch–Mitzenmacher double hashing),
h1 and h2 the two halves of the key's 16-byte BLAKE2b digest: stable across processes and
runtimes, unlike Python's salted ``hash``.

Why ``__contains__`` walks the positions itself: a probe is the typo repair's unit of work (up
to ``RetrievalBudget.max_typo_probes`` a question), and most candidates are not keys, so the walk
stops at the first clear bit (about half are set) and steps with h1 and h2 reduced mod m first
(the same positions, in small integers): ~2.5× faster than listing all seven.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

_from_bytes = int.from_bytes

__all__ = ["BITS_PER_TERM", "BloomFilter", "encode_bloom"]

BITS_PER_TERM = 10
HASHES = 7
"""With 10 bits a key, 7 positions give the fewest false positives (≈ 0.8 %)."""
_MIN_BYTES = 8


def _positions(key: str, bits: int) -> list[int]:
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=16).digest()
    first = int.from_bytes(digest[:8], "little")
    step = int.from_bytes(digest[8:], "little") | 1
    return [(first + i * step) % bits for i in range(HASHES)]


def encode_bloom(keys: Iterable[str], count: int) -> bytes:
    """The filter bytes of ``keys`` (``count`` of them), sized ``BITS_PER_TERM`` bits a key."""
    size = max(_MIN_BYTES, -(-count * BITS_PER_TERM // 8))
    bits = bytearray(size)
    for key in keys:
        for position in _positions(key, size * 8):
            bits[position >> 3] |= 1 << (position & 7)
    return bytes(bits)


class BloomFilter:
    """Membership that may say yes wrongly (rarely) and never says no wrongly."""

    __slots__ = ("_bits", "_size")

    def __init__(self, bits: bytes) -> None:
        self._bits = bits
        self._size = len(bits) * 8

    def __contains__(self, key: object) -> bool:
        """The bits of ``_positions(key, m)``, in order, until one is clear."""
        size = self._size
        if not isinstance(key, str) or not size:
            return False
        digest = hashlib.blake2b(key.encode("utf-8"), digest_size=16).digest()
        at = _from_bytes(digest[:8], "little") % size
        step = (_from_bytes(digest[8:], "little") | 1) % size
        bits = self._bits
        for _ in range(HASHES):
            if not bits[at >> 3] >> (at & 7) & 1:
                return False
            at += step
            if at >= size:
                at -= size
        return True
