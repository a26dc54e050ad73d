"""Encoder and decoder of the typo repair's word directory, ``words.bin``, and its chunks.

Why chunks (index format 3, docs/adr/0010): the surface-word repair ("equipamneto" → the corpus
word "equipamento" → its term) needs, per partition, folded word → index term and sound key →
words. At a million sections those maps were ≈ 15 MB resident across the partitions, read only by
weak queries with an unknown word. They are now one sorted map (keys ``w:<folded word>`` and
``s:<sound key>``) cut into chunks of about ``WORD_CHUNK_BYTES`` (each a
``router.package.format.string_map``, named by its content: ``w-<sha16>.bin``); the directory
``words.bin`` keeps each chunk's first key and hash, the words' letters (the edit alphabet) and a
Bloom filter of the keys (``router.package.format.bloom``), so the ~50 × length one-edit
spellings of a word are checked without reading their chunks (``router.package.stores.words``).

    words.bin
        magic    b"KRWDIR01"          8 bytes
        header   uint32 keys K, chunks C
        then the key block of ``router.package.format.key_directory`` (first keys, hashes
        naming the chunks w-<hash>.bin, the folded words' letters, the Bloom filter of the K keys)
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from router.errors import PackageFormatError
from router.package.format.arrays import header_fields
from router.package.format.key_directory import KeyDirectory, decode_key_block, encode_key_block
from router.package.format.string_map import encode_string_map

__all__ = [
    "SOUND_PREFIX",
    "WORDS_NAME",
    "WORDS_STEM",
    "WORD_CHUNK_BYTES",
    "WORD_PREFIX",
    "decode_word_directory",
    "encode_word_chunks",
]

WORDS_NAME = "words.bin"
WORDS_STEM = "w"
WORD_PREFIX = "w:"  # w:<folded corpus word> → its index term
SOUND_PREFIX = "s:"  # s:<sound key> → its folded words, joined (``StringMap.values_of``)
WORD_CHUNK_BYTES = 16 * 1024
_MAGIC = b"KRWDIR01"
_HEADER = struct.Struct("<8sII")


def encode_word_chunks(
    stem_of: Mapping[str, str], sounds: Mapping[str, str], chunk_bytes: int = WORD_CHUNK_BYTES
) -> dict[str, bytes]:
    """``words.bin`` and its chunks for a partition's surface words (folded word → term) and
    sound keys (key → joined words); the same maps give the same bytes."""
    entries = {WORD_PREFIX + word: stem for word, stem in stem_of.items()}
    entries.update({SOUND_PREFIX + key: words for key, words in sounds.items()})
    keys = sorted(entries)  # code point order is UTF-8 byte order
    groups: list[dict[str, str]] = []
    size = chunk_bytes
    for key in keys:
        if size >= chunk_bytes:
            groups.append({})
            size = 0
        groups[-1][key] = entries[key]
        size += len(key.encode("utf-8")) + len(entries[key].encode("utf-8")) + 8
    chunks = [(min(group), encode_string_map(group)) for group in groups]
    letters = (ch for word in stem_of for ch in word)
    block, files = encode_key_block(WORDS_STEM, chunks, keys, letters)
    files[WORDS_NAME] = _HEADER.pack(_MAGIC, len(keys), len(chunks)) + block
    return files


def decode_word_directory(blob: bytes, what: str = WORDS_NAME) -> KeyDirectory:
    """The directory in ``words.bin``; a wrong magic or inconsistent table refuses the package."""
    keys, chunks = header_fields(blob, _HEADER, _MAGIC, what)
    if (keys > 0) != (chunks > 0):
        raise PackageFormatError(f"{what} has an inconsistent chunk table")
    return decode_key_block(blob, _HEADER.size, chunks, WORDS_STEM, what)
