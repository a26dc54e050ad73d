"""Encoder and decoder of a partition's postings split into term shards (docs/index-format.md).

Why shards (docs/adr/0010, step 3): a query reads the posting lists of a handful of terms; at a
million sections a partition's postings are hundreds of megabytes, so they are cut into files of
about ``SHARD_POSTINGS`` postings by analysed term (Pagefind's lesson: shard by what the query
looks up after analysis, the stem, not the raw word) and fetched per query. What stays resident
is the directory: where each shard starts in the sorted vocabulary and its content hash (its file
name, so an unchanged shard keeps its name across versions). A term's id comes from its
vocabulary chunk (``router.package.stores.vocabulary``); each shard carries its own terms' largest
impact per block, which bounds their scores.

Why a head for long lists: at a million sections a common word is in half of them. A query of
such words alone cannot stop MaxScore early (every list is essential), so it accumulated a
score for each of hundreds of thousands of sections (26 MB at one query) until the postings
budget cut it short. A list of at least ``HEAD_MIN_POSTINGS`` also stores its largest impacts in
decreasing order (a quarter of the list, at most ``HEAD_POSTINGS``): the threshold algorithm
reads them and usually stops after a few hundred to a few thousand (BM25's length normalisation
gives short sections the largest impacts of every term, so the best sections come first in all
lists at once).

    <key>.postings.bin  (the directory)
        magic    b"KRSHRD02"                  8 bytes
        header   uint32 terms T, shards C, blocks B, section space S
        names    B × 16-byte ASCII block name, NUL-padded
        first    uint32[C + 1]                first term of each shard; first[C] = T
        hashes   C × 16 ASCII hex digits      shard c is the file ``<key>.s-<hash>.bin``
    <key>.s-<hash>.bin  (a shard)
        magic    b"KRSHAR02"                  8 bytes
        header   uint32 terms n, blocks B, heads H (bytes of the heads file)
        maxima   float32[B × n]               largest quantized impact of each term, per block
        heads    a ``postings`` blocks file of H bytes (router.package.format.postings), same
        blocks and
                 terms: a long list's largest impacts, largest first (equal ones by section
                 number), the same quantized values; empty for the other terms
        then a ``postings`` blocks file over the shard's terms only (section numbers ascending):
        term t of the partition is local term t − first[c]
"""

from __future__ import annotations

import hashlib
import heapq
import struct
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

from router.errors import PackageFormatError
from router.package.format.arrays import header_fields, little_endian_bytes, little_endian_view
from router.package.format.postings import (
    Postings,
    decode_blocks,
    encode_blocks,
    encode_postings,
    quantization_scale,
    quantize,
)
from router.package.version.content_names import Digests

__all__ = [
    "HEAD_MIN_POSTINGS",
    "HEAD_POSTINGS",
    "SHARD_POSTINGS",
    "ShardDirectory",
    "decode_directory",
    "decode_shard",
    "encode_shards",
    "shard_name",
]

SHARD_POSTINGS = 8192
"""Postings per shard file (about 64 KiB): a cold query of ten terms fetches ~10 such files at
once, and a long list is one shard of its own."""

HEAD_POSTINGS = 32768
"""Most impacts stored in decreasing order per long list (192 KiB, a list of 131,072 postings or
more). Measured at 1M sections, the threshold algorithm stopped after 407 (two common words at
k=10), 680 and 3,692 (three) of them; two of the flattest lists (the 1,024th impact 99 % of the
first) needed 13,404 at k=10 and 17,608 at the cascade's k=50, where a head of 8,192 ran out."""

HEAD_MIN_POSTINGS = 32768
"""A list this long gets a head (of a quarter of it): below, MaxScore reads it whole in about a
millisecond."""

_MAGIC = b"KRSHRD02"
_SHARD_MAGIC = b"KRSHAR02"
_SHARD_HEADER = struct.Struct("<8sIII")
_HEADER = struct.Struct("<8sIIII")
_NAME = 16
_HASH = 16

CscBlock = tuple[Sequence[int], Sequence[int], Sequence[float]]


def shard_name(digest: str) -> str:
    """The file name of a shard (without its partition prefix)."""
    return f"s-{digest}.bin"


@dataclass(frozen=True)
class ShardDirectory:
    """The resident part of a partition's postings."""

    blocks: tuple[str, ...]
    first: Sequence[int]  # C + 1
    hashes: Digests
    terms: int
    sections: int  # section number space of every block

    def shard_of(self, term: int) -> int:
        return bisect_right(self.first, term) - 1

    def file_name(self, shard: int) -> str:
        return shard_name(self.hashes[shard])


def encode_shards(
    blocks: Mapping[str, CscBlock],
    num_terms: int,
    sections: int,
    target: int = SHARD_POSTINGS,
    head_min: int | None = None,
    head: int | None = None,
) -> tuple[bytes, dict[str, bytes], list[int]]:
    """The directory, the shard files (named by content) of a partition's posting blocks, and
    each term's document frequency (its longest list over the blocks); lists of at least
    ``head_min`` postings (``HEAD_MIN_POSTINGS``) carry their largest impacts: a quarter of the
    list, at most ``head`` (``HEAD_POSTINGS``)."""
    head_min = HEAD_MIN_POSTINGS if head_min is None else head_min
    head = HEAD_POSTINGS if head is None else head
    names = list(blocks)
    sizes = [
        max(blocks[b][0][t + 1] - blocks[b][0][t] for b in names) if names else 0
        for t in range(num_terms)
    ]
    first = [0]
    count = 0
    for term, size in enumerate(sizes):
        if count and count + size > target:
            first.append(term)
            count = 0
        count += size
    first.append(num_terms)
    scales = {b: quantization_scale(blocks[b][2]) for b in names}  # one per block: all shards
    files: dict[str, bytes] = {}
    hashes: list[str] = []
    for start, end in pairwise(first):
        maxima = [  # in quantized units, as the shard's impacts
            max(quantize(blocks[b][2][blocks[b][0][t] : blocks[b][0][t + 1]], scales[b]), default=0)
            for b in names
            for t in range(start, end)
        ]
        heads = encode_blocks(
            {b: _heads(blocks[b], start, end, sections, scales[b], head_min, head) for b in names}
        )
        blob = b"".join(
            [
                _SHARD_HEADER.pack(_SHARD_MAGIC, end - start, len(names), len(heads)),
                little_endian_bytes("f", maxima),
                heads,
                encode_blocks(
                    {b: _slice(blocks[b], start, end, sections, scales[b]) for b in names}
                ),
            ]
        )
        digest = hashlib.sha256(blob).hexdigest()[:_HASH]
        hashes.append(digest)
        files[shard_name(digest)] = blob
    directory = b"".join(
        [
            _HEADER.pack(_MAGIC, num_terms, len(hashes), len(names), sections),
            *(b.encode("ascii").ljust(_NAME, b"\0") for b in names),
            little_endian_bytes("I", first),
            "".join(hashes).encode("ascii"),
        ]
    )
    return directory, files, sizes


def _slice(block: CscBlock, start: int, end: int, sections: int, scale: float) -> bytes:
    indptr, ids, impacts = block
    low, high = indptr[start], indptr[end]
    local = [p - low for p in indptr[start : end + 1]]
    return encode_postings(local, ids[low:high], impacts[low:high], sections, scale)


def _heads(
    block: CscBlock, start: int, end: int, sections: int, scale: float, head_min: int, head: int
) -> bytes:
    """The heads block of terms [start, end): each long list's largest quantized impacts (a
    quarter of it, at most ``head``), largest first and equal ones by section number; nothing
    for shorter lists."""
    indptr, ids, impacts = block
    local = [0]
    head_ids: list[int] = []
    head_impacts: list[int] = []
    for term in range(start, end):
        low, high = indptr[term], indptr[term + 1]
        if high - low >= head_min:
            levels = quantize(impacts[low:high], scale)
            size = min(head, (high - low) // 4)
            order = heapq.nsmallest(size, range(high - low), key=lambda i: (-levels[i], i))
            head_ids.extend(ids[low + i] for i in order)
            head_impacts.extend(levels[i] for i in order)
        local.append(len(head_ids))
    # stored as impacts × scale: encode_postings quantizes them back to the same integers
    return encode_postings(local, head_ids, [q * scale for q in head_impacts], sections, scale)


def decode_directory(blob: bytes) -> ShardDirectory:
    """The directory's arrays (zero-copy views); a wrong magic or length refuses the package."""
    terms, shards, blocks, sections = header_fields(blob, _HEADER, _MAGIC, "postings directory")
    expected = _HEADER.size + blocks * _NAME + 4 * (shards + 1) + shards * _HASH
    if len(blob) != expected or not blocks:
        raise PackageFormatError(f"postings directory is {len(blob)} bytes, expected {expected}")
    view = memoryview(blob)
    offset = _HEADER.size
    names = tuple(
        bytes(view[offset + i * _NAME : offset + (i + 1) * _NAME]).rstrip(b"\0").decode("ascii")
        for i in range(blocks)
    )
    offset += blocks * _NAME
    first = little_endian_view(view[offset : offset + 4 * (shards + 1)], "I")
    offset += 4 * (shards + 1)
    raw = bytes(view[offset : offset + shards * _HASH]).decode("ascii")
    hashes = Digests(raw)
    if first[0] != 0 or first[shards] != terms or list(first) != sorted(first):
        raise PackageFormatError("postings directory has an inconsistent shard table")
    return ShardDirectory(names, first, hashes, terms, sections)


def decode_shard(
    blob: bytes | memoryview, directory: ShardDirectory, shard: int, key: str
) -> dict[str, Postings]:
    """A shard's blocks, checked against the directory; each carries its terms' maxima, its
    heads, and a stable ``key`` for the scorer's memos."""
    start, end = directory.first[shard], directory.first[shard + 1]
    what = f"shard {shard} of {key}"
    terms, block_count, heads_size = header_fields(blob, _SHARD_HEADER, _SHARD_MAGIC, what)
    heads_at = _SHARD_HEADER.size + 4 * terms * block_count
    blocks_at = heads_at + heads_size
    if terms != end - start or block_count != len(directory.blocks) or len(blob) < blocks_at:
        raise PackageFormatError(f"{what} does not match its directory")
    view = memoryview(blob)
    all_maxima = little_endian_view(view[_SHARD_HEADER.size : heads_at], "f")
    heads = decode_blocks(view[heads_at:blocks_at])  # type: ignore[arg-type]
    decoded = decode_blocks(view[blocks_at:])  # type: ignore[arg-type]
    if tuple(decoded) != directory.blocks or tuple(heads) != directory.blocks:
        raise PackageFormatError(f"{what} has other blocks than its directory")
    found: dict[str, Postings] = {}
    for index, (name, postings) in enumerate(decoded.items()):
        head = heads[name]
        if (
            postings.num_terms != terms
            or postings.num_sections != directory.sections
            or head.num_terms != terms
            or head.scale != postings.scale
        ):
            raise PackageFormatError(f"{what} does not match its directory")
        maxima = all_maxima[index * terms : (index + 1) * terms]
        has_heads = head.indptr[terms] > 0
        found[name] = replace(
            postings,
            maxima=maxima,
            key=f"{key}:{shard}:{name}",
            head=head if has_heads else None,
        )
    return found
