"""The resident part of a sorted-key table cut into content-named chunks: first keys, hashes,
letters and a Bloom filter (the vocabulary's ``terms.bin``, the typo words' ``words.bin``).

Why one codec: both tables are sorted string keys in chunks of ~16 KiB; a lookup bisects the
chunks' first keys, and the typo repair checks ~50 × length candidate spellings against the
Bloom filter before reading anything (``router.package.format.bloom``). Layout of the block, after
the
table's own header (little-endian):

    uint32   A alphabet bytes, B filter bytes
    offsets  uint32[C + 1]        byte offsets of each chunk's first key in the key blob
    hashes   C × 16 ASCII bytes   the hex digest naming chunk c: <stem>-<hash>.bin
    keys     the first keys, UTF-8, concatenated (sorted: UTF-8 bytes order)
    alphabet the keys' letters, UTF-8 (typo repair's edit alphabet)
    filter   the Bloom filter of the keys
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import cast

from router.errors import PackageFormatError
from router.package.format.arrays import SortedKeys, little_endian_bytes, little_endian_view
from router.package.format.bloom import BloomFilter, encode_bloom
from router.package.version.content_names import CONTENT_HASH_DIGITS, Digests, content_name

__all__ = ["KeyDirectory", "decode_first_keys", "decode_key_block", "encode_key_block"]

_SIZES = struct.Struct("<II")


@dataclass(frozen=True)
class KeyDirectory:
    """Each chunk's first key and hash, the keys' letters and their Bloom filter."""

    stem: str
    offsets: Sequence[int]
    hashes: Digests
    first_keys: bytes
    alphabet: str
    bloom: BloomFilter

    @property
    def chunks(self) -> int:
        return len(self.hashes)

    def file_name(self, chunk: int) -> str:
        return f"{self.stem}-{self.hashes[chunk]}.bin"

    def first_key(self, chunk: int) -> bytes:
        return bytes(self.first_keys[self.offsets[chunk] : self.offsets[chunk + 1]])

    def chunk_of(self, key: str) -> int | None:
        """The chunk that holds ``key`` if any does (the last whose first key ≤ it); None when
        the table is empty."""
        if not self.chunks:
            return None
        return SortedKeys(self.first_key, self.chunks).last_at_most(key.encode("utf-8"))

    def may_hold(self, key: str) -> bool:
        """False when the table certainly lacks ``key``; True may be wrong (≈ 0.8 %)."""
        return key in self.bloom


def encode_key_block(
    stem: str, chunks: Sequence[tuple[str, bytes]], keys: Sequence[str], alphabet: Iterable[str]
) -> tuple[bytes, dict[str, bytes]]:
    """The block for ``chunks`` ((first key, chunk bytes) in key order) of the sorted ``keys``,
    and the chunk files by name."""
    files = {content_name(stem, blob): blob for _, blob in chunks}
    digests = [content_name(stem, blob)[len(stem) + 1 : -len(".bin")] for _, blob in chunks]
    firsts = [first.encode("utf-8") for first, _ in chunks]
    offsets = [0]
    for first in firsts:
        offsets.append(offsets[-1] + len(first))
    letters = "".join(sorted(set(alphabet))).encode("utf-8")
    bloom = encode_bloom(keys, len(keys))
    block = b"".join(
        [
            _SIZES.pack(len(letters), len(bloom)),
            little_endian_bytes("I", offsets),
            "".join(digests).encode("ascii"),
            *firsts,
            letters,
            bloom,
        ]
    )
    return block, files


def decode_first_keys(
    blob: bytes, at: int, chunks: int, what: str
) -> tuple[Sequence[int], Digests, int]:
    """The offsets and chunk hashes at ``at`` (``uint32[C + 1]`` then ``C`` hashes), and where
    the first keys start: the part every sorted-key directory shares (``words.bin``,
    ``terms.bin`` and ``exact.bin``). A truncated block or unordered offsets refuse the
    package."""
    hashes_at = at + 4 * (chunks + 1)
    keys_at = hashes_at + CONTENT_HASH_DIGITS * chunks
    if len(blob) < keys_at:
        raise PackageFormatError(f"{what} is truncated")
    view = memoryview(blob)
    offsets = little_endian_view(view[at:hashes_at], "I")
    if offsets[0] != 0 or list(offsets) != sorted(offsets):
        raise PackageFormatError(f"{what} has inconsistent key offsets")
    try:
        digests = bytes(view[hashes_at:keys_at]).decode("ascii")
    except UnicodeDecodeError as exc:
        raise PackageFormatError(f"{what} has a malformed chunk hash") from exc
    return offsets, Digests(digests), keys_at


def decode_key_block(blob: bytes, at: int, chunks: int, stem: str, what: str) -> KeyDirectory:
    """The block of ``chunks`` chunks at ``at`` in ``blob``, which it must end; a truncated or
    inconsistent block refuses the package."""
    if len(blob) < at + _SIZES.size:
        raise PackageFormatError(f"{what} is truncated")
    alphabet_bytes, bloom_bytes = _SIZES.unpack_from(blob, at)
    offsets, digests, keys_at = decode_first_keys(blob, at + _SIZES.size, chunks, what)
    alphabet_at = keys_at + offsets[chunks]
    if len(blob) != alphabet_at + alphabet_bytes + bloom_bytes:
        raise PackageFormatError(f"{what} is {len(blob)} bytes, its header says otherwise")
    view = memoryview(blob)
    try:
        alphabet = bytes(view[alphabet_at : alphabet_at + alphabet_bytes]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PackageFormatError(f"{what} has a malformed alphabet") from exc
    return KeyDirectory(  # the first keys and the filter stay views of the bundle: no copy
        stem,
        offsets,
        digests,
        cast(bytes, view[keys_at:alphabet_at]),
        alphabet,
        BloomFilter(cast(bytes, view[alphabet_at + alphabet_bytes :])),
    )
