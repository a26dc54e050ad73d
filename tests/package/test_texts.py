"""Section texts stay out of the resident set: chunked, fetched for what is quoted, checked."""

from __future__ import annotations

import asyncio

import pytest

from router.compile.build import BuildResult
from router.contract import QueryRequest
from router.errors import IntegrityError, PackageFormatError
from router.knowledge.parser import strip_wikilinks
from router.package.format.texts import TEXTS_INDEX_NAME, decode_text_index, encode_texts
from router.package.reader import load_package
from router.package.stores.budget import ReaderBudget
from router.package.stores.texts import SectionTexts
from router.pipeline import CascadeServices, run_cascade, run_query
from router.sync import run_sync
from tests.common import TODAY, catalog_of

TEXTS = ["Primeira seção.", "", "ação com acentos — ç", "x" * 50, "última"]


def test_texts_round_trip_across_chunks() -> None:
    files = encode_texts(TEXTS, chunk_bytes=20)
    index = decode_text_index(files[TEXTS_INDEX_NAME])
    assert index.chunks == len(files) - 1 > 1
    for section, text in enumerate(TEXTS):
        assert index.text(section, files[index.chunk_name(index.chunk_of(section))]) == text


def test_a_malformed_text_index_is_refused() -> None:
    blob = encode_texts(TEXTS)[TEXTS_INDEX_NAME]
    for broken in (blob[:10], b"KRTEXT99" + blob[8:], blob + b"\0"):
        with pytest.raises(PackageFormatError):
            decode_text_index(broken)


def test_only_the_chunks_of_the_asked_sections_are_fetched_and_cached() -> None:
    files = encode_texts(TEXTS, chunk_bytes=20)
    fetched: list[str] = []

    async def fetch(name: str) -> bytes:
        fetched.append(name)
        return files[name]

    texts = SectionTexts(decode_text_index(files[TEXTS_INDEX_NAME]), fetch, budget_bytes=10_000)
    got, cost = run_sync(texts.load([4, 0]))
    assert got == {0: TEXTS[0], 4: TEXTS[4]}
    assert cost.chunks_fetched == len(fetched) == 2 and cost.round_trips == 1
    again, cost = run_sync(texts.load([0]))
    assert again == {0: TEXTS[0]} and cost.chunks_fetched == 0 and len(fetched) == 2


def test_the_chunk_cache_stays_under_its_byte_budget() -> None:
    files = encode_texts([f"texto {i} " * 20 for i in range(40)], chunk_bytes=100)

    async def fetch(name: str) -> bytes:
        return files[name]

    texts = SectionTexts(decode_text_index(files[TEXTS_INDEX_NAME]), fetch, budget_bytes=500)
    for section in range(40):
        run_sync(texts.load([section]))
        assert texts.cached_bytes <= 500 + 200  # at most one chunk over while it is in use


def test_the_package_keeps_no_section_text_resident(built: BuildResult) -> None:
    files = built.package.files()
    package = load_package(files["manifest.json"], files.__getitem__)
    catalog = catalog_of(package)
    assert all(section.text == "" for section in catalog.sections)
    expected = {
        (d.semantic_id, s.section_id): strip_wikilinks(s.text)
        for d in built.corpus.documents
        for s in d.sections
    }
    got = {}
    first_global = 0
    assert package.partitions[0].texts.cached_bytes == 0  # one cache for every partition
    for partition in package.partitions:  # every partition's texts, each read from its chunks
        texts, _ = run_sync(partition.texts.load(range(partition.section_count)))
        for local in range(partition.section_count):
            index = first_global + local
            doc = catalog.documents[catalog.section_doc[index]]
            got[doc.semantic_id, catalog.sections[index].section_id] = texts[local]
        first_global += partition.section_count
    assert got == expected


def test_a_query_reads_only_the_chunks_it_quotes(built: BuildResult) -> None:
    files = built.package.files()
    fetched: list[str] = []

    async def fetch_chunk(name: str) -> bytes:
        fetched.append(name)
        return files[name]

    package = load_package(files["manifest.json"], files.__getitem__, fetch_chunk=fetch_chunk)
    response = run_query(package, QueryRequest(query="O que é APR?"), today=TODAY)
    chunks = [name for name in files if ".texts-" in name]
    assert response.answer and response.context and response.context.relevant_chunks[0].text
    texts = [name for name in fetched if ".texts-" in name]  # the shards come the same way
    assert 0 < len(texts) < len(chunks)
    records = [name for name in fetched if ".records-" in name]
    stages = response.trace["stages"]
    with_records = stages["early_records"]["chunks_fetched"] + stages["records"]["chunks_fetched"]
    assert with_records + stages["texts"]["chunks_fetched"] == len(texts) + len(records)


def test_a_corrupt_chunk_degrades_the_answer_and_never_fails_the_query(built: BuildResult) -> None:
    files = dict(built.package.files())
    for name in [n for n in files if ".texts-" in n]:
        files[name] = files[name][:-1] + b"?"
    package = load_package(files["manifest.json"], files.__getitem__)
    with pytest.raises(IntegrityError):
        run_sync(package.view(None).texts.load([0]))
    response = asyncio.run(
        run_cascade(package, QueryRequest(query="O que é APR?"), None, CascadeServices(), TODAY)
    )
    assert response.results[0].doc_id == "apr"  # the ranking still stands
    assert response.trace["stages"]["texts"]["error"] == "package_integrity"
    assert response.context and all(c.text == "" for c in response.context.relevant_chunks)


def test_every_partition_shares_one_chunk_budget(built: BuildResult) -> None:
    files = built.package.files()
    fetched: list[str] = []

    async def fetch_chunk(name: str) -> bytes:
        fetched.append(name)
        return files[name]

    budget = 8_000
    package = load_package(
        files["manifest.json"],
        files.__getitem__,
        fetch_chunk=fetch_chunk,
        budget=ReaderBudget(chunk_bytes=budget),
    )
    shared, *tenants = package.partitions
    last = shared.section_count - 1
    run_sync(shared.texts.load([last]))
    assert len(fetched) == 1
    for partition in tenants:  # every tenant's texts and records, more than the budget
        run_sync(partition.texts.load(range(partition.section_count)))
        run_sync(partition.records.load(range(partition.doc_count)))
    assert sum(len(files[name]) for name in fetched[1:]) > budget
    chunk = max(len(b) for n, b in files.items() if ".texts-" in n or ".records-" in n)
    assert shared.texts.cached_bytes <= budget + chunk  # one budget, not one per tenant
    before = len(fetched)
    run_sync(shared.texts.load([last]))
    assert len(fetched) == before + 1  # the tenants' reads pushed the shared chunk out


def test_an_edit_or_an_insertion_renames_only_the_chunks_around_it() -> None:
    import random

    rng = random.Random(7)
    texts = [" ".join(f"palavra{rng.randrange(10_000)}" for _ in range(rng.randrange(5, 400)))
             for _ in range(600)]  # fmt: skip
    before = set(encode_texts(texts)) - {TEXTS_INDEX_NAME}
    edited = list(texts)
    edited[100] += " uma frase nova no meio do texto"
    edited.insert(400, "uma seção inteira nova")
    after = set(encode_texts(edited)) - {TEXTS_INDEX_NAME}
    assert len(before) > 40
    assert len(after - before) <= 6  # ~2 chunks per change, where a fixed size renamed 40+
    sizes = [len(blob) for name, blob in encode_texts(texts).items() if name != TEXTS_INDEX_NAME]
    assert 8 * 1024 <= sum(sizes) / len(sizes) <= 32 * 1024
