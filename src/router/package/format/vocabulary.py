"""Encoder and decoder of the vocabulary: a chunk (a compiled range of terms) and its directory.

A partition's terms are cut into such chunks (files ``v-<sha16>.bin``), listed by the resident
directory ``terms.bin`` (read by ``router.package.stores.vocabulary``; docs/index-format.md).
A chunk holds, per term, everything a query needs of it besides its postings: its id (its rank
in the partition's sorted vocabulary, which the posting shards are numbered by), its document
frequency (typo repair prefers the commonest correction), and the keyword phrases filed under it.

Why phrases live here (docs/adr/0010): a keyword phrase matches only when all of its terms are in
the question, so it is enough to file it under one of them — the one in the fewest phrases. The
keyword stage then reads the phrases of the query's own terms, from the chunks the query reads
anyway, and no keyword table stays resident (56 MB at a million sections).

    magic    b"KRVOCB01"                       8 bytes
    header   uint32 first id F, terms n, phrases E, phrase terms M
    df       uint32[n]        sections holding term F + i (the largest over posting blocks)
    holds    uint32[n + 1]    the phrases filed under term F + i are [holds[i], holds[i+1])
    sections uint32[E]        the view section a phrase points at
    starts   uint32[E + 1]    the terms of phrase e are phrase[starts[e]:starts[e+1]]
    phrase   uint32[M]        partition term ids
    kinds    uint8[E]         ``KEYWORD_KINDS`` order (+ padding to 4)
    terms    a ``terms.bin``-layout block of the n terms (``router.package.format.term_index``)

The chunks hold about ``VOCABULARY_CHUNK_BYTES`` each, named by their content; what stays
resident is the directory: each chunk's first term, id and hash, the letters of the vocabulary
and a Bloom filter of its terms (``router.package.format.bloom``) for typo repair — about 1.3
bytes a term.

    terms.bin
        magic    b"KRVDIR01"          8 bytes
        header   uint32 terms T, chunks C
        firsts   uint32[C + 1]        first term id of each chunk; firsts[C] = T
        then the key block of ``router.package.format.key_directory`` (first terms, hashes
        naming the chunks v-<hash>.bin, the vocabulary's letters, the Bloom filter of the T terms)
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from router.errors import PackageFormatError
from router.package.format.arrays import header_fields, little_endian_bytes, little_endian_view
from router.package.format.key_directory import KeyDirectory, decode_key_block, encode_key_block
from router.package.format.term_index import TermIndex, decode_terms, encode_terms

__all__ = [
    "VOCABULARY_CHUNK_BYTES",
    "VOCABULARY_NAME",
    "VOCABULARY_STEM",
    "KeywordEntry",
    "TermEntry",
    "VocabularyChunk",
    "VocabularyDirectory",
    "decode_chunk",
    "decode_vocabulary_directory",
    "encode_chunk",
    "encode_vocabulary",
    "entry_bytes",
]

KeywordEntry = tuple[tuple[int, ...], int, int]
"""One keyword phrase: its distinct term ids (sorted), the view section it names, its kind."""

_MAGIC = b"KRVOCB01"
_HEADER = struct.Struct("<8sIIII")


@dataclass(frozen=True)
class TermEntry:
    """What a partition knows of one of its terms, besides its postings."""

    id: int
    df: int
    keywords: tuple[KeywordEntry, ...]


def entry_bytes(term: str, keywords: Sequence[KeywordEntry]) -> int:
    """The bytes a term costs in a chunk (to cut chunks of about the same size)."""
    return len(term.encode("utf-8")) + 12 + sum(13 + 4 * len(p) for p, _, _ in keywords)


def encode_chunk(
    first_id: int,
    terms: Sequence[str],
    df: Sequence[int],
    keywords: Sequence[Sequence[KeywordEntry]],
) -> bytes:
    """The chunk of ``terms`` (sorted; ids from ``first_id``), their df and filed phrases."""
    entries = [entry for filed in keywords for entry in filed]
    holds, starts = [0], [0]
    for filed in keywords:
        holds.append(holds[-1] + len(filed))
    for phrase, _, _ in entries:
        starts.append(starts[-1] + len(phrase))
    kinds = bytes(kind for _, _, kind in entries)
    return b"".join(
        [
            _HEADER.pack(_MAGIC, first_id, len(terms), len(entries), starts[-1]),
            little_endian_bytes("I", df),
            little_endian_bytes("I", holds),
            little_endian_bytes("I", [section for _, section, _ in entries]),
            little_endian_bytes("I", starts),
            little_endian_bytes("I", [t for phrase, _, _ in entries for t in phrase]),
            kinds + b"\0" * (-len(kinds) % 4),
            encode_terms(terms),
        ]
    )


@dataclass(frozen=True)
class VocabularyChunk:
    """A decoded chunk (zero-copy views of its blob)."""

    first_id: int
    terms: TermIndex
    df: Sequence[int]
    holds: Sequence[int]
    sections: Sequence[int]
    starts: Sequence[int]
    phrase: Sequence[int]
    kinds: bytes

    def lookup(self, term: str) -> TermEntry | None:
        """The entry of ``term``, or None when this chunk does not hold it."""
        local = self.terms.get(term)
        if local is None:
            return None
        filed = tuple(
            (
                tuple(self.phrase[self.starts[e] : self.starts[e + 1]]),
                self.sections[e],
                self.kinds[e],
            )
            for e in range(self.holds[local], self.holds[local + 1])
        )
        return TermEntry(self.first_id + local, self.df[local], filed)


def decode_chunk(blob: bytes, what: str) -> VocabularyChunk:
    """The chunk in ``blob`` (``what`` names it in errors); a malformed one is refused."""
    first_id, count, entries, members = header_fields(blob, _HEADER, _MAGIC, what)
    view = memoryview(blob)
    offset = _HEADER.size

    def take(size: int) -> Sequence[int]:
        nonlocal offset
        if offset + 4 * size > len(blob):
            raise PackageFormatError(f"{what} is truncated")
        found = little_endian_view(view[offset : offset + 4 * size], "I")
        offset += 4 * size
        return found

    df, holds, sections = take(count), take(count + 1), take(entries)
    starts, phrase = take(entries + 1), take(members)
    kinds = bytes(view[offset : offset + entries])
    offset += entries + (-entries % 4)
    terms = decode_terms(view[offset:])  # type: ignore[arg-type]
    if (
        len(terms) != count
        or holds[0] != 0
        or holds[count] != entries
        or starts[0] != 0
        or starts[entries] != members
        or len(kinds) != entries
    ):
        raise PackageFormatError(f"{what} does not match its header")
    return VocabularyChunk(first_id, terms, df, holds, sections, starts, phrase, kinds)


VOCABULARY_NAME = "terms.bin"


VOCABULARY_STEM = "v"


VOCABULARY_CHUNK_BYTES = 16 * 1024


_DIRECTORY_MAGIC = b"KRVDIR01"


_DIRECTORY_HEADER = struct.Struct("<8sII")


def encode_vocabulary(
    terms: Sequence[str],
    df: Sequence[int],
    keywords: Sequence[Sequence[KeywordEntry]],
    chunk_bytes: int = VOCABULARY_CHUNK_BYTES,
) -> dict[str, bytes]:
    """``terms.bin`` and its chunks for a partition's sorted ``terms``, their ``df`` and the
    keyword phrases filed under each; the same vocabulary gives the same bytes."""
    cuts = [0]
    size = 0
    for term_id, term in enumerate(terms):
        if size >= chunk_bytes:
            cuts.append(term_id)
            size = 0
        size += entry_bytes(term, keywords[term_id])
    if terms:
        cuts.append(len(terms))
    chunks = [
        (terms[start], encode_chunk(start, terms[start:end], df[start:end], keywords[start:end]))
        for start, end in pairwise(cuts)
    ]
    letters = (ch for term in terms for ch in term)
    block, files = encode_key_block(VOCABULARY_STEM, chunks, terms, letters)
    head = _DIRECTORY_HEADER.pack(_DIRECTORY_MAGIC, len(terms), len(chunks))
    files[VOCABULARY_NAME] = head + little_endian_bytes("I", cuts if terms else [0]) + block
    return files


@dataclass(frozen=True)
class VocabularyDirectory:
    """The chunks' first terms and hashes (``keys``), and the first term id of each."""

    terms: int
    firsts: Sequence[int]
    keys: KeyDirectory


def decode_vocabulary_directory(blob: bytes, what: str = VOCABULARY_NAME) -> VocabularyDirectory:
    """The directory in ``terms.bin``; a wrong magic or inconsistent table refuses the package."""
    terms, chunks = header_fields(blob, _DIRECTORY_HEADER, _DIRECTORY_MAGIC, what)
    block_at = _DIRECTORY_HEADER.size + 4 * (chunks + 1)
    if len(blob) < block_at:
        raise PackageFormatError(f"{what} is truncated")
    firsts = little_endian_view(memoryview(blob)[_DIRECTORY_HEADER.size : block_at], "I")
    keys = decode_key_block(blob, block_at, chunks, VOCABULARY_STEM, what)
    if (
        firsts[0] != 0
        or firsts[chunks] != terms
        or list(firsts) != sorted(firsts)
        or (terms > 0) != (chunks > 0)
    ):
        raise PackageFormatError(f"{what} has an inconsistent chunk table")
    return VocabularyDirectory(terms, firsts, keys)
