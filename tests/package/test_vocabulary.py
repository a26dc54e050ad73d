"""The vocabulary in chunks: every term found through the directory, its filter, its failures."""

from __future__ import annotations

import asyncio
import random
import string

import pytest

from router.compile.build import BuildResult
from router.contract import QueryRequest
from router.errors import PackageFormatError
from router.package.format.bloom import BloomFilter, _positions, encode_bloom
from router.package.format.vocabulary import (
    VOCABULARY_NAME,
    KeywordEntry,
    decode_vocabulary_directory,
    encode_vocabulary,
)
from router.package.reader import load_package
from router.package.stores.vocabulary import PartitionVocabulary, VocabularyChunks
from router.package.version.content_names import Digests
from router.pipeline import CascadeServices, run_cascade
from router.sync import run_sync
from tests.common import TODAY

WORDS = sorted({"".join(random.Random(n).choices("abcdeçãé", k=3 + n % 9)) for n in range(3000)})


def _store(files: dict[str, bytes]) -> PartitionVocabulary:
    async def fetch(name: str) -> bytes:
        return files[name.partition(".")[2]]

    directory = decode_vocabulary_directory(files[VOCABULARY_NAME])
    return PartitionVocabulary("shared", directory, fetch, VocabularyChunks(1 << 24))


def test_every_term_is_found_through_the_directory_with_its_df_and_phrases() -> None:
    df = [1 + i % 17 for i in range(len(WORDS))]
    keywords: list[list[KeywordEntry]] = [
        [((i, (i + 1) % len(WORDS)), i * 3, i % 5)] if i % 4 == 0 else [] for i in range(len(WORDS))
    ]
    files = encode_vocabulary(WORDS, df, keywords, chunk_bytes=512)
    store = _store(files)
    assert store.directory.keys.chunks > 20 and len(files) == store.directory.keys.chunks + 1
    probes = [*WORDS, "", "a", "zzzz", "ção", WORDS[0] + "x"]
    found, cost = run_sync(store.entries(probes))
    for term_id, term in enumerate(WORDS):
        entry = found[term]
        assert entry is not None and (entry.id, entry.df) == (term_id, df[term_id])
        assert list(entry.keywords) == keywords[term_id]
    assert all(found[p] is None for p in probes if p not in WORDS)
    assert cost.chunks_fetched == store.directory.keys.chunks and cost.round_trips == 1
    again, cost = run_sync(store.entries([WORDS[7]]))
    assert again[WORDS[7]] == found[WORDS[7]] and cost.chunks_fetched == 0  # held by the isolate
    assert run_sync(store.read_all()) == WORDS
    assert encode_vocabulary(WORDS, df, keywords, chunk_bytes=512) == files  # reproducible


def test_the_filter_never_misses_a_term_and_rarely_admits_another() -> None:
    bloom = BloomFilter(encode_bloom(WORDS, len(WORDS)))
    assert all(word in bloom for word in WORDS)
    rng = random.Random(7)
    strangers = {"".join(rng.choices(string.ascii_lowercase, k=8)) for _ in range(20_000)}
    strangers -= set(WORDS)
    admitted = sum(word in bloom for word in strangers) / len(strangers)
    assert admitted < 0.02  # ≈ 0.8 % at 10 bits a term


def test_a_probe_reads_the_bits_the_encoder_set() -> None:
    """``__contains__`` walks the positions itself (stopping at the first clear bit): it answers
    as every one of ``_positions`` being set would, for keys and strangers, at any size."""
    rng = random.Random(3)
    for count in (1, 7, 300):
        keys = ["".join(rng.choices(string.ascii_lowercase, k=6)) for _ in range(count)]
        blob = encode_bloom(keys, count)
        bloom, size = BloomFilter(blob), len(blob) * 8
        strangers = ["".join(rng.choices(string.ascii_lowercase + "çã", k=7)) for _ in range(3000)]
        for key in keys + strangers:
            expected = all(blob[p >> 3] >> (p & 7) & 1 for p in _positions(key, size))
            assert (key in bloom) is expected


def test_a_malformed_directory_or_a_misplaced_chunk_is_refused() -> None:
    files = encode_vocabulary(WORDS, [1] * len(WORDS), [[] for _ in WORDS], chunk_bytes=512)
    blob = files[VOCABULARY_NAME]
    for broken in (blob[:10], b"KRVDIR99" + blob[8:], blob[:-1], blob + b"\0"):
        with pytest.raises(PackageFormatError):
            decode_vocabulary_directory(broken)
    store = _store(files)
    first, second = store.directory.keys.file_name(0), store.directory.keys.file_name(1)
    files[first] = files[second]  # a chunk's bytes under another chunk's name
    with pytest.raises(PackageFormatError, match="does not match its directory"):
        run_sync(store.entries([WORDS[0]]))


def test_an_empty_vocabulary_needs_no_read() -> None:
    store = _store(encode_vocabulary([], [], []))
    found, cost = run_sync(store.entries(["apr"]))
    assert found == {"apr": None} and cost.round_trips == 0


def _package_failing(files: dict[str, bytes], marker: str):  # type: ignore[no-untyped-def]
    async def fetch_chunk(name: str) -> bytes:
        blob = files[name]
        return blob[:-1] + b"?" if marker in name else blob

    return load_package(files["manifest.json"], files.__getitem__, fetch_chunk=fetch_chunk)


@pytest.mark.parametrize("marker", [".v-", ".s-"])
def test_an_unreadable_vocabulary_or_shard_degrades_the_query_and_names_the_error(
    built: BuildResult, marker: str
) -> None:
    """The exact hit still answers; the lexical stages score nothing and say why."""
    package = _package_failing(dict(built.package.files()), marker)
    exact = QueryRequest(query="apr.validity")
    response = asyncio.run(run_cascade(package, exact, None, CascadeServices(), TODAY))
    assert response.results[0].doc_id == "apr.validity"
    assert response.trace["stages"]["bm25"]["error"] == "package_integrity"
    vague = QueryRequest(query="como renovar uma permissão de trabalho vencida")
    response = asyncio.run(run_cascade(package, vague, None, CascadeServices(), TODAY))
    assert response.trace["stages"]["bm25"]["error"] == "package_integrity"
    assert response.trace["stages"]["bm25"]["candidates"] == []


def test_chunk_digests_are_cut_from_one_string_and_checked() -> None:
    text = "0123456789abcdef" * 3
    digests = Digests(text)
    assert len(digests) == 3 and digests[2] == "0123456789abcdef"
    with pytest.raises(IndexError):
        digests[3]
    for broken in ("0123", "0123456789abcdeX"):
        with pytest.raises(PackageFormatError):
            Digests(broken)
