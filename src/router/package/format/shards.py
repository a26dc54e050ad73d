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
    <key>.h-<hash>.bin  (a long list's head page; KRSHRD03 directories name them)
        magic    b"KRHPAG01"                  8 bytes
        header   uint32 blocks B, zero
        lengths  uint32[B]                    the list's full length in each block (its df)
        then a ``postings`` blocks file of one term: the list's ``HEAD_PAGE_POSTINGS`` largest
        impacts (the head's first ones), section numbers ascending

Why head pages (docs/adr/0029): at a million sections a common word's list is several MB, and
reading it whole put a query's bytes at 1.6 MB p50 and 7.9 MB p95. When a query's long lists do
not fit its byte budget, the commonest are read as their head page only: 192 KiB holding the
largest impacts, which BM25's length normalisation gives to the same short sections the top k
is made of. A page is a file of its own, named by its content like a shard, so it is verified,
colo-cached and shared across versions like one (a range of the shard could be neither).
"""

from __future__ import annotations

import hashlib
import heapq
import struct
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
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
    "HEAD_PAGE_POSTINGS",
    "HEAD_POSTINGS",
    "SHARD_POSTINGS",
    "ShardDirectory",
    "decode_directory",
    "decode_head_page",
    "decode_shard",
    "encode_shards",
    "head_page_name",
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

HEAD_PAGE_POSTINGS = 32768
"""Largest impacts of a long list in its head page (192 KiB; the whole head). Why not 8,192,
which covers what the threshold algorithm needs for a question of common words alone (ADR
0011): a question mixing rare and common words ranks its rare words' sections without the
common words' shares outside the page, and on real text (SciFact and CISI scaled to a million
sections, ``bench/page_quality.py``) pages of 8,192 lost 0.029 and 0.065 nDCG@10, pages of
32,768 0.013 and 0.017 (docs/adr/0029). A query that reads a page instead of a list of 800k
postings still fetches 4 % of it."""

_MAGIC = b"KRSHRD03"
_OLD_MAGIC = b"KRSHRD02"  # before head pages: decoded as a directory without pages
_PAGE_MAGIC = b"KRHPAG01"
_PAGE_HEADER = struct.Struct("<8sII")
_SHARD_MAGIC = b"KRSHAR02"
_SHARD_HEADER = struct.Struct("<8sIII")
_HEADER = struct.Struct("<8sIIII")
_NAME = 16
_HASH = 16

CscBlock = tuple[Sequence[int], Sequence[int], Sequence[float]]


def shard_name(digest: str) -> str:
    """The file name of a shard (without its partition prefix)."""
    return f"s-{digest}.bin"


def head_page_name(digest: str) -> str:
    """The file name of a long list's head page (without its partition prefix)."""
    return f"h-{digest}.bin"


@dataclass(frozen=True)
class ShardDirectory:
    """The resident part of a partition's postings."""

    blocks: tuple[str, ...]
    first: Sequence[int]  # C + 1
    hashes: Digests
    terms: int
    sections: int  # section number space of every block
    pages: Mapping[int, str] = field(default_factory=dict)  # shard → its head page's digest

    def shard_of(self, term: int) -> int:
        return bisect_right(self.first, term) - 1

    def file_name(self, shard: int) -> str:
        return shard_name(self.hashes[shard])

    def page_name(self, shard: int) -> str | None:
        """The head page of a long list's shard, or None (a shard of short lists has none)."""
        digest = self.pages.get(shard)
        return None if digest is None else head_page_name(digest)


def encode_shards(
    blocks: Mapping[str, CscBlock],
    num_terms: int,
    sections: int,
    target: int | None = None,
    head_min: int | None = None,
    head: int | None = None,
    page: int | None = None,
) -> tuple[bytes, dict[str, bytes], list[int]]:
    """The directory, the shard files and head pages (named by content) of a partition's posting
    blocks, and each term's document frequency (its longest list over the blocks); lists of at
    least ``head_min`` postings (``HEAD_MIN_POSTINGS``) carry their largest impacts: a quarter
    of the list, at most ``head`` (``HEAD_POSTINGS``), the first ``page``
    (``HEAD_PAGE_POSTINGS``) of them also in a head page when the list is a shard of its own."""
    head_min = HEAD_MIN_POSTINGS if head_min is None else head_min
    head = HEAD_POSTINGS if head is None else head
    page = HEAD_PAGE_POSTINGS if page is None else page
    target = SHARD_POSTINGS if target is None else target
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
    pages: dict[int, str] = {}
    for start, end in pairwise(first):
        if end - start == 1 and sizes[start] >= head_min:  # a long list: its head page
            blob = _head_page(blocks, start, sections, scales, head, page)
            pages[len(hashes)] = digest = hashlib.sha256(blob).hexdigest()[:_HASH]
            files[head_page_name(digest)] = blob
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
            struct.pack("<I", len(pages)),
            little_endian_bytes("I", list(pages)),
            "".join(pages.values()).encode("ascii"),
        ]
    )
    return directory, files, sizes


def _head_page(
    blocks: Mapping[str, CscBlock],
    term: int,
    sections: int,
    scales: Mapping[str, float],
    head: int,
    page: int,
) -> bytes:
    """A long list's head page: its full length per block, then its largest ``page`` impacts
    (the head's first ones: the same order and ties) by ascending section number."""
    lengths = [blocks[b][0][term + 1] - blocks[b][0][term] for b in blocks]
    pages = {}
    for name, block in blocks.items():
        ids, levels = _head_order(block, term, scales[name], head)
        kept = sorted(zip(ids[:page], levels[:page], strict=True))
        scale = scales[name]
        pages[name] = encode_postings(
            [0, len(kept)], [s for s, _ in kept], [q * scale for _, q in kept], sections, scale
        )
    header = _PAGE_HEADER.pack(_PAGE_MAGIC, len(lengths), 0)
    return header + little_endian_bytes("I", lengths) + encode_blocks(pages)


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
    indptr = block[0]
    local = [0]
    head_ids: list[int] = []
    head_impacts: list[int] = []
    for term in range(start, end):
        if indptr[term + 1] - indptr[term] >= head_min:
            ids, levels = _head_order(block, term, scale, head)
            head_ids.extend(ids)
            head_impacts.extend(levels)
        local.append(len(head_ids))
    # stored as impacts × scale: encode_postings quantizes them back to the same integers
    return encode_postings(local, head_ids, [q * scale for q in head_impacts], sections, scale)


def _head_order(block: CscBlock, term: int, scale: float, head: int) -> tuple[list[int], list[int]]:
    """A list's head: its largest quantized impacts (a quarter of it, at most ``head``), largest
    first and equal ones by section number; (section numbers, levels)."""
    indptr, ids, impacts = block
    low, high = indptr[term], indptr[term + 1]
    levels = quantize(impacts[low:high], scale)
    size = min(head, (high - low) // 4)
    order = heapq.nsmallest(size, range(high - low), key=lambda i: (-levels[i], i))
    return [ids[low + i] for i in order], [levels[i] for i in order]


def decode_directory(blob: bytes) -> ShardDirectory:
    """The directory's arrays (zero-copy views); a wrong magic or length refuses the package."""
    magic = _OLD_MAGIC if bytes(blob[:8]) == _OLD_MAGIC else _MAGIC
    terms, shards, blocks, sections = header_fields(blob, _HEADER, magic, "postings directory")
    expected = _HEADER.size + blocks * _NAME + 4 * (shards + 1) + shards * _HASH
    pages = _page_count(blob, expected) if magic == _MAGIC else 0
    if magic == _MAGIC:
        expected += 4 + pages * (4 + _HASH)
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
    offset += shards * _HASH + 4
    paged = little_endian_view(view[offset : offset + 4 * pages], "I")
    offset += 4 * pages
    digests = bytes(view[offset : offset + pages * _HASH]).decode("ascii")
    if list(paged) != sorted(set(paged)) or any(s >= shards for s in paged):
        raise PackageFormatError("postings directory has an inconsistent head page table")
    page_digests = {shard: digests[i * _HASH : (i + 1) * _HASH] for i, shard in enumerate(paged)}
    return ShardDirectory(names, first, hashes, terms, sections, page_digests)


def _page_count(blob: bytes, at: int) -> int:
    """The number of head pages a KRSHRD03 directory names (its field after the hashes)."""
    if len(blob) < at + 4:
        raise PackageFormatError(f"postings directory is {len(blob)} bytes, expected {at + 4}+")
    return int(struct.unpack_from("<I", blob, at)[0])


def decode_head_page(
    blob: bytes | memoryview, directory: ShardDirectory, shard: int, key: str
) -> dict[str, Postings]:
    """A long list's head page as the blocks of its one-term shard: its largest impacts only,
    each block's ``lengths`` the full list's (the IDF counts every posting), ``maxima`` its
    largest impact. Checked against the directory."""
    what = f"head page of shard {shard} of {key}"
    blocks, _ = header_fields(blob, _PAGE_HEADER, _PAGE_MAGIC, what)
    at = _PAGE_HEADER.size + 4 * blocks
    if blocks != len(directory.blocks) or len(blob) < at:
        raise PackageFormatError(f"{what} does not match its directory")
    if shard not in directory.pages or directory.first[shard + 1] - directory.first[shard] != 1:
        raise PackageFormatError(f"{what}: the directory names no page for that shard")
    view = memoryview(blob)
    lengths = little_endian_view(view[_PAGE_HEADER.size : at], "I")
    decoded = decode_blocks(view[at:])  # type: ignore[arg-type]
    if tuple(decoded) != directory.blocks:
        raise PackageFormatError(f"{what} has other blocks than its directory")
    found: dict[str, Postings] = {}
    for index, (name, postings) in enumerate(decoded.items()):
        kept = postings.indptr[1] if postings.num_terms == 1 else -1
        if kept < 0 or kept > lengths[index] or postings.num_sections != directory.sections:
            raise PackageFormatError(f"{what} does not match its directory")
        found[name] = replace(
            postings,
            maxima=[max(postings.scores, default=0)],
            key=f"{key}:{shard}:{name}:page",
            lengths=lengths[index : index + 1],
        )
    return found


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
