"""Files read lazily are named by their content: ``<stem>-<sha16>.bin``, checked on every read.

Why (index format 3, docs/adr/0010): a package of a million sections has tens of thousands of
such files (posting shards, exact-key chunks, text and record chunks). Listing each in the
manifest made the manifest grow with the corpus (≈ 1 MB of JSON at 100k sections, decoded on
every cold isolate), so only the resident files are listed there, with their full sha256; each
resident directory or index names its lazy files by the first 16 hex digits of their sha256, and
a read is verified against its own name. The chain is unbroken: the manifest's hashes cover the
directories, the directories' names cover the files they list. An unchanged file keeps its name
in the next version, which is what a delta publish uploads nothing for.
"""

from __future__ import annotations

import hashlib
from typing import TypeVar

from router.errors import IntegrityError, PackageFormatError

BlobT = TypeVar("BlobT", bytes, memoryview, bytes | memoryview)

__all__ = [
    "CONTENT_HASH_DIGITS",
    "LAZY_STEMS",
    "Digests",
    "content_name",
    "digest_of",
    "is_lazy",
    "verify_named",
]

CONTENT_HASH_DIGITS = 16
LAZY_STEMS: tuple[str, ...] = ("s", "h", "v", "x", "g", "w", "texts", "records")
"""Posting shards and long lists' head pages; vocabulary, exact-key, graph and word chunks;
section-text and record chunks."""
_SUFFIX = ".bin"
_HEX = frozenset("0123456789abcdef")


def content_name(stem: str, blob: bytes) -> str:
    """The file name of ``blob`` as a lazy file of ``stem`` (without its partition prefix)."""
    return f"{stem}-{digest_of(blob)}{_SUFFIX}"


def digest_of(blob: bytes | memoryview) -> str:
    return hashlib.sha256(blob).hexdigest()[:CONTENT_HASH_DIGITS]


def _digest_in(name: str) -> str | None:
    """The content digest a lazy file's name carries, or None when it is not such a name."""
    if not name.endswith(_SUFFIX):
        return None
    base = name[: -len(_SUFFIX)].rpartition(".")[2]
    stem, dash, digest = base.rpartition("-")
    if not dash or stem not in LAZY_STEMS or len(digest) != CONTENT_HASH_DIGITS:
        return None
    return digest if set(digest) <= _HEX else None


def is_lazy(name: str) -> bool:
    """True for a lazily read file, ``<partition>.<stem>-<sha16>.bin`` (or without partition)."""
    return _digest_in(name) is not None


def verify_named(name: str, blob: BlobT) -> BlobT:
    """``blob`` if its content matches the digest in its name, else ``IntegrityError``."""
    digest = _digest_in(name)
    if digest is None or digest_of(blob) != digest:
        raise IntegrityError(f"artifact {name!r} fails its content check ({len(blob)} bytes)")
    return blob


class Digests:
    """The content digests of a directory's chunks, kept as one ASCII string (16 characters a
    chunk) and cut on demand: a tuple of strings cost ≈ 73 bytes a chunk (5 MB for the 70k text
    and record chunks of a million sections)."""

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        if len(text) % CONTENT_HASH_DIGITS or not set(text) <= _HEX:
            raise PackageFormatError("a directory's chunk digests are malformed")
        self._text = text

    def __len__(self) -> int:
        return len(self._text) // CONTENT_HASH_DIGITS

    def __getitem__(self, chunk: int) -> str:
        if not 0 <= chunk < len(self):
            raise IndexError(chunk)
        return self._text[chunk * CONTENT_HASH_DIGITS : (chunk + 1) * CONTENT_HASH_DIGITS]
