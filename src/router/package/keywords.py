"""Encoder and decoder of ``keywords.bin``: a partition's keyword phrases, compiled.

Why compiled (docs/adr/0010): the keyword stage matches whole curated phrases — keywords,
aliases, titles, headings, wikilink labels — against the question. Built at query time from the
catalog, its inverted index cost ~70 MiB at 100k sections; compiled, it is integer arrays over the
partition's own term ids, read without building anything.

An entry is one (phrase, section) pair: its distinct terms, the section it points at (in view
numbering: a tenant partition's own sections from ``first_section``, the shared partition's as
they are), and its kind. Curated kinds come first, and a phrase already entered for a section is
not entered again, so the kind kept is the best one.

    magic    b"KRKWRD01"                      8 bytes
    header   uint32 entries E, terms T, entry terms M, postings P
    sections uint32[E]
    kinds    uint8[E] (KEYWORD_KINDS order; + padding to 4)
    starts   uint32[E + 1]   the terms of entry e are terms[starts[e]:starts[e+1]]
    terms    uint32[M]       partition term ids
    indptr   uint32[T + 1]   the entries holding term t are entries[indptr[t]:indptr[t+1]]
    entries  uint32[P]
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from router.errors import PackageFormatError
from router.knowledge.model import Document
from router.package.arrays import header_fields, little_endian_bytes, little_endian_view

__all__ = ["KEYWORD_KINDS", "KeywordTable", "decode_keywords", "encode_keywords"]

KEYWORD_KINDS = ("keyword", "alias", "title", "heading", "link")
_MAGIC = b"KRKWRD01"
_HEADER = struct.Struct("<8sIIII")


def encode_keywords(
    documents: Sequence[Document],
    analyze: Callable[[str], list[str]],
    vocabulary: Mapping[str, int],
    first_section: int,
    target_section: Callable[[str], int | None],
) -> bytes:
    """``keywords.bin`` of a partition; ``target_section(id)`` is the view section a wikilink
    target names (this partition's, or the shared partition's), or None."""
    entries: list[tuple[list[int], int, int]] = []
    seen: set[tuple[frozenset[str], int]] = set()

    def add(phrase: str, section: int, kind: str) -> None:
        key = frozenset(analyze(phrase))
        if not key or (key, section) in seen or not all(t in vocabulary for t in key):
            return  # (a term the partition does not index can never be asked of it)
        seen.add((key, section))
        entries.append((sorted(vocabulary[t] for t in key), section, KEYWORD_KINDS.index(kind)))

    section = first_section
    for doc in documents:
        for kind, phrases in (
            ("keyword", doc.keywords),
            ("alias", doc.aliases),
            ("title", [doc.title]),
        ):
            for phrase in phrases:
                add(phrase, section, kind)
        section += len(doc.sections)
    section = first_section
    for doc in documents:
        for part in doc.sections:
            add(part.heading, section, "heading")
            for link in part.links:
                target = target_section(link.target)
                if target is not None and link.label and link.label != link.target:
                    add(link.label, target, "link")
            section += 1
    by_term: list[list[int]] = [[] for _ in range(len(vocabulary))]
    for number, (terms, _, _) in enumerate(entries):
        for term in terms:
            by_term[term].append(number)
    starts, indptr = [0], [0]
    for terms, _, _ in entries:
        starts.append(starts[-1] + len(terms))
    for holders in by_term:
        indptr.append(indptr[-1] + len(holders))
    kinds = bytes(kind for _, _, kind in entries)
    return b"".join(
        [
            _HEADER.pack(_MAGIC, len(entries), len(vocabulary), starts[-1], indptr[-1]),
            little_endian_bytes("I", [s for _, s, _ in entries]),
            kinds + b"\0" * (-len(kinds) % 4),
            little_endian_bytes("I", starts),
            little_endian_bytes("I", [t for terms, _, _ in entries for t in terms]),
            little_endian_bytes("I", indptr),
            little_endian_bytes("I", [e for holders in by_term for e in holders]),
        ]
    )


@dataclass(frozen=True)
class KeywordTable:
    """The decoded phrases of one partition (zero-copy views)."""

    sections: Sequence[int]
    kinds: bytes
    starts: Sequence[int]
    terms: Sequence[int]
    indptr: Sequence[int]
    entries: Sequence[int]

    def holding(self, term: int) -> Sequence[int]:
        """The entries whose phrase has ``term``."""
        return self.entries[self.indptr[term] : self.indptr[term + 1]]

    def phrase(self, entry: int) -> Sequence[int]:
        return self.terms[self.starts[entry] : self.starts[entry + 1]]


def decode_keywords(blob: bytes) -> KeywordTable:
    """The table of ``keywords.bin``; a wrong magic or length refuses the package."""
    count, terms, members, postings = header_fields(blob, _HEADER, _MAGIC, "keywords.bin")
    padded = count + (-count % 4)
    expected = _HEADER.size + 4 * count + padded + 4 * (count + 1) + 4 * members
    expected += 4 * (terms + 1) + 4 * postings
    if len(blob) != expected:
        raise PackageFormatError(f"keywords.bin is {len(blob)} bytes, expected {expected}")
    view = memoryview(blob)
    offset = _HEADER.size

    def take(size: int) -> Sequence[int]:
        nonlocal offset
        found = little_endian_view(view[offset : offset + 4 * size], "I")
        offset += 4 * size
        return found

    sections = take(count)
    kinds = bytes(view[offset : offset + count])
    offset += padded
    starts, phrase_terms, indptr, entries = (
        take(count + 1),
        take(members),
        take(terms + 1),
        take(postings),
    )
    return KeywordTable(sections, kinds, starts, phrase_terms, indptr, entries)
