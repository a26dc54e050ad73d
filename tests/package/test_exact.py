"""Exact keys in chunks: every key found through the directory, read with the shards, checked."""

from __future__ import annotations

import asyncio

import pytest

from router.compile.build import BuildResult
from router.contract import QueryRequest
from router.errors import PackageFormatError
from router.package.format.exact import (
    EXACT_NAME,
    decode_exact_directory,
    encode_exact_chunks,
    exact_keys_of,
)
from router.package.reader import load_package
from router.package.stores.exact import ExactTables, PartitionExact
from router.pipeline import CascadeServices, run_cascade
from router.sync import run_sync
from tests.common import TODAY


def test_every_key_is_found_through_the_directory_across_many_chunks(
    built: BuildResult,
) -> None:
    documents = [d for d in built.corpus.documents if d.tenant == "*"]
    files = encode_exact_chunks(documents, chunk_bytes=512)
    directory = decode_exact_directory(files[EXACT_NAME])
    assert directory.chunks > 20 and len(files) == directory.chunks + 1

    async def fetch(name: str) -> bytes:
        return files[name.partition(".")[2]]

    store = PartitionExact("shared", directory, fetch, ExactTables(1 << 24))
    expected = exact_keys_of(documents)
    probes = [*expected, "", "0", "zzzz", "apr.validity.nope", "ação"]
    found, cost = run_sync(store.targets(probes))
    assert {k: v for k, v in found.items() if v} == expected
    assert cost.chunks_fetched == directory.chunks and cost.round_trips == 1
    again, cost = run_sync(store.targets(["apr"]))
    assert again["apr"] == expected["apr"] and cost.chunks_fetched == 0  # held by the isolate


def test_a_malformed_exact_directory_is_refused() -> None:
    blob = encode_exact_chunks([])[EXACT_NAME]
    for broken in (blob[:10], b"KREXDR99" + blob[8:], blob[:-1] + b"\x01" * 3):
        with pytest.raises(PackageFormatError):
            decode_exact_directory(broken)


def _counting_package(files: dict[str, bytes]):  # type: ignore[no-untyped-def]
    fetched: list[str] = []

    async def fetch_chunk(name: str) -> bytes:
        await asyncio.sleep(0)  # a real store suspends: reads of one step overlap
        fetched.append(name)
        return files[name]

    return load_package(files["manifest.json"], files.__getitem__, fetch_chunk=fetch_chunk), fetched


def test_a_cold_query_reads_keys_with_its_terms_then_its_shards(built: BuildResult) -> None:
    """Two sequential round trips before scoring: exact keys and vocabulary chunks together,
    then the posting shards those terms name (docs/adr/0010)."""
    package, fetched = _counting_package(dict(built.package.files()))
    request = QueryRequest(query="apr.validity")
    response = asyncio.run(run_cascade(package, request, None, CascadeServices(), TODAY))
    stages = response.trace["stages"]
    assert response.results[0].doc_id == "apr.validity" and response.results[0].scores["exact"]
    assert stages["exact"]["chunks_fetched"] >= 1 and stages["bm25"]["round_trips"] == 2
    assert sum(".x-" in name for name in fetched) == stages["exact"]["chunks_fetched"]
    assert sum(".v-" in name for name in fetched) == stages["bm25"]["term_chunks_fetched"] >= 1
    first_shard = next(i for i, name in enumerate(fetched) if ".s-" in name)
    assert all(".s-" not in name for name in fetched[:first_shard])
    assert all(".x-" not in name and ".v-" not in name for name in fetched[first_shard:])
    warm = asyncio.run(run_cascade(package, request, None, CascadeServices(), TODAY))
    assert "round_trips" not in warm.trace["stages"]["bm25"]  # the isolate holds them now


def test_an_unreadable_exact_chunk_leaves_the_ranking_and_names_the_error(
    built: BuildResult,
) -> None:
    files = dict(built.package.files())
    for name in [n for n in files if ".x-" in n]:
        files[name] = files[name][:-1] + b"?"
    package, _ = _counting_package(files)
    request = QueryRequest(query="apr.validity")
    response = asyncio.run(run_cascade(package, request, None, CascadeServices(), TODAY))
    assert response.trace["stages"]["exact"] == {
        "ms": response.trace["stages"]["exact"]["ms"],
        "hits": [],
        "error": "package_integrity",
    }
    assert response.results and response.results[0].scores.get("exact") is None
