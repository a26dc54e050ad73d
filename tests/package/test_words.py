"""The typo repair's word maps in chunks: every key found, the filter honest, bad tables refused."""

from __future__ import annotations

import pytest

from router.errors import PackageFormatError
from router.package.format.words import (
    SOUND_PREFIX,
    WORD_PREFIX,
    WORDS_NAME,
    decode_word_directory,
    encode_word_chunks,
)
from router.package.stores.words import PartitionWords, WordTables
from router.sync import run_sync

STEM_OF = {f"palavra{n:04d}": f"palavr{n % 97}" for n in range(2000)}
SOUNDS = {f"PLVR{n}": "\x1f".join(sorted(STEM_OF)[n::50]) for n in range(50)}


def _store(files: dict[str, bytes]) -> PartitionWords:
    async def fetch(name: str) -> bytes:
        return files[name.partition(".")[2]]

    return PartitionWords(
        "shared", decode_word_directory(files[WORDS_NAME]), fetch, WordTables(1 << 24)
    )


def test_every_word_and_sound_key_is_found_across_many_chunks() -> None:
    files = encode_word_chunks(STEM_OF, SOUNDS, chunk_bytes=512)
    store = _store(files)
    assert store.directory.chunks > 20 and len(files) == store.directory.chunks + 1
    keys = [WORD_PREFIX + w for w in STEM_OF] + [SOUND_PREFIX + k for k in SOUNDS]
    found, cost = run_sync(store.values([*keys, "w:nada", "s:", "", "zzz"]))
    assert {k[2:]: found[k] for k in keys if k.startswith(WORD_PREFIX)} == STEM_OF
    assert {k[2:]: found[k] for k in keys if k.startswith(SOUND_PREFIX)} == SOUNDS
    assert found["w:nada"] is None and found["zzz"] is None
    assert cost.round_trips == 1 and cost.chunks_fetched == store.directory.chunks
    assert all(store.may_hold(k) for k in keys)  # the filter never misses
    assert set(store.directory.alphabet) == set("".join(STEM_OF))
    assert encode_word_chunks(STEM_OF, SOUNDS, chunk_bytes=512) == files  # reproducible


def test_a_partition_without_words_reads_nothing_and_a_bad_directory_is_refused() -> None:
    empty = _store(encode_word_chunks({}, {}))
    found, cost = run_sync(empty.values(["w:apr"]))
    assert found == {"w:apr": None} and cost.round_trips == 0
    blob = encode_word_chunks(STEM_OF, SOUNDS, chunk_bytes=512)[WORDS_NAME]
    for broken in (blob[:12], b"KRWDIR99" + blob[8:], blob[:-1], blob + b"\0"):
        with pytest.raises(PackageFormatError):
            decode_word_directory(broken)
