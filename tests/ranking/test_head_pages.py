"""Long lists' head pages: what a page holds, and a query that reads pages instead of whole lists
(ranking, IDF, bytes, trace, and a warm isolate's whole shards used when it holds them)."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from router.analysis.analyzer import AnalyzerConfig
from router.compile.beir import load_beir
from router.compile.indexer import BuildConfig, compile_documents
from router.config import RetrievalBudget, RouterConfig
from router.contract import QueryRequest
from router.errors import PackageFormatError
from router.package.format import shards as shard_format
from router.package.format.fields import DEFAULT_FIELD_WEIGHTS
from router.package.format.shards import (
    decode_directory,
    decode_head_page,
    decode_shard,
    encode_shards,
)
from router.package.reader import KnowledgePackage, load_package
from router.pipeline import run_query
from router.ranking.bm25 import block_weights, query_lists, top_k, weighted_scores
from router.ranking.fetch_budget import within_fetch_budget
from router.ranking.pruning import weighted_top_k
from router.ranking.score_bounds import ScoreBounds
from router.sync import run_sync
from tests.common import SHARED_DATA, TODAY, with_terms

SCIFACT = SHARED_DATA / "scifact"
SECTIONS = 600


def _blocks(seed: int) -> dict[str, tuple[list[int], list[int], list[float]]]:
    """Lists of 1 to 500 sections whose impacts take few values (ties are frequent)."""
    rng = random.Random(seed)
    indptr, ids, impacts = [0], [], []
    for _ in range(30):
        members = sorted(rng.sample(range(SECTIONS), rng.choice([1, 20, 150, 300, 500])))
        ids += members
        impacts += [rng.choice([0.5, 1.0, 1.5, 2.0]) for _ in members]
        indptr.append(len(ids))
    return {"bm25f": (indptr, ids, impacts)}


def _encoded(seed: int) -> tuple[bytes, dict[str, bytes]]:
    directory, files, _ = encode_shards(
        _blocks(seed), 30, SECTIONS, target=100, head_min=120, head=64, page=16
    )
    return directory, files


def test_a_long_list_has_a_page_of_its_largest_impacts_and_its_full_length() -> None:
    directory_blob, files = _encoded(3)
    directory = decode_directory(directory_blob)
    blocks = _blocks(3)["bm25f"]
    paged = 0
    for shard in range(len(directory.first) - 1):
        term = directory.first[shard]
        length = blocks[0][term + 1] - blocks[0][term]
        single = directory.first[shard + 1] - term == 1
        if not (single and length >= 120):
            assert directory.page_name(shard) is None
            continue
        paged += 1
        page = decode_head_page(files[str(directory.page_name(shard))], directory, shard, "p")
        whole = decode_shard(files[directory.file_name(shard)], directory, shard, "p")["bm25f"]
        postings = page["bm25f"]
        assert postings.list_length(0) == length == whole.list_length(0)
        kept = list(zip(postings.section_ids, postings.scores, strict=True))
        assert [s for s, _ in kept] == sorted(s for s, _ in kept)  # by section number
        expected = sorted(  # the head's order: largest first, equal ones by section
            zip(whole.section_ids, whole.scores, strict=True), key=lambda p: (-p[1], p[0])
        )[:16]
        assert sorted(kept) == sorted(expected)
        assert postings.maxima is not None and postings.maxima[0] == max(whole.scores)
    assert paged >= 3


def test_a_directory_before_head_pages_still_decodes() -> None:
    directory_blob, _ = _encoded(5)
    directory = decode_directory(directory_blob)
    shards = len(directory.hashes)
    old = b"KRSHRD02" + directory_blob[8 : len(directory_blob) - 4 - 20 * len(directory.pages)]
    before = decode_directory(old)
    assert before.pages == {} and list(before.first) == list(directory.first)
    assert [before.file_name(s) for s in range(shards)] == [
        directory.file_name(s) for s in range(shards)
    ]


def test_a_page_that_does_not_match_its_directory_is_refused() -> None:
    directory_blob, files = _encoded(8)
    directory = decode_directory(directory_blob)
    shard = next(iter(directory.pages))
    blob = files[str(directory.page_name(shard))]
    for broken in (blob[:-2], b"KRHPAG09" + blob[8:], blob[:8] + b"\x02" + blob[9:]):
        with pytest.raises(PackageFormatError):
            decode_head_page(broken, directory, shard, "p")
    other = next(s for s in range(len(directory.hashes)) if s not in directory.pages)
    with pytest.raises(PackageFormatError):
        decode_head_page(blob, directory, other, "p")  # a page of another shard's size
    bad_table = bytearray(directory_blob)
    bad_table[-20 * len(directory.pages) - 4 : -20 * len(directory.pages)] = b"\x09\0\0\0"
    with pytest.raises(PackageFormatError):
        decode_directory(bytes(bad_table))


@pytest.fixture(scope="module")
def scifact_files() -> Iterator[dict[str, bytes]]:
    """SciFact built so that lists of 200 postings or more are shards of their own with a
    head page of 32 (production: 32,768 and 8,192)."""
    if not SCIFACT.is_dir():
        pytest.skip(f"SciFact not found at {SCIFACT}")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shard_format, "SHARD_POSTINGS", 150)
        patch.setattr(shard_format, "HEAD_MIN_POSTINGS", 200)
        patch.setattr(shard_format, "HEAD_POSTINGS", 64)
        patch.setattr(shard_format, "HEAD_PAGE_POSTINGS", 32)
        collection = load_beir(SCIFACT)
        config = BuildConfig(analyzer=AnalyzerConfig(language="english"))
        yield dict(compile_documents(collection.documents, config).files())


def _load(files: dict[str, bytes]) -> KnowledgePackage:
    """An isolate's package (its own caches) over the built files."""
    return load_package(files["manifest.json"], files.__getitem__)


@pytest.fixture()
def scifact(scifact_files: dict[str, bytes]) -> KnowledgePackage:
    return _load(scifact_files)


def _common(package: KnowledgePackage, count: int) -> list[str]:
    """The ``count`` commonest terms with a head page among the corpus's queries' terms."""
    view = package.view(None)
    queries = load_beir(SCIFACT).queries.values()
    terms = {t for q in queries for t in view.analyzer.terms(q)}
    view = with_terms(view, terms)
    known = sorted((t for t in terms if view.knows(t)), key=view.document_frequency)
    paged = [t for t in known if view.has_head_page(t)]
    return paged[-count:]


def test_a_query_of_pages_ranks_exactly_what_it_read_with_the_full_idf(
    scifact: KnowledgePackage, scifact_files: dict[str, bytes]
) -> None:
    common = _common(scifact, 20)
    weights = block_weights(scifact.view(None).block_names, DEFAULT_FIELD_WEIGHTS)
    rng = random.Random(7)
    queries = [rng.sample(common, n) for n in (1, 2, 3) for _ in range(8)]
    singles = 0
    for terms in queries:
        whole = with_terms(scifact.view(None), terms)
        full = run_sync(whole.load_postings(terms)).shards
        paged = with_terms(_load(scifact_files).view(None), terms)  # an isolate holding no list
        read = run_sync(paged.load_postings(terms, heads=common))
        assert read.head_pages == sum(t in common for t in set(terms))
        exact = query_lists(whole, terms, weights, "lucene", full)
        partial = query_lists(paged, terms, weights, "lucene", read.shards)
        assert [w for _, _, w in exact] == [w for _, _, w in partial]  # the same IDF
        expected = top_k(weighted_scores(partial), 10)
        ranking = weighted_top_k(partial, 10, None, bounds=ScoreBounds())
        assert [s for s, _ in ranking.ranked] == [s for s, _ in expected]
        if len(terms) == 1:  # a page holds its list's 32 largest impacts: the top 10's scores
            best = top_k(weighted_scores(exact), 10)
            assert [v for _, v in ranking.ranked] == [v for _, v in best]
            singles += 1
    assert singles == 8


def test_the_cascade_reads_pages_past_its_budget_and_says_so(
    scifact: KnowledgePackage, scifact_files: dict[str, bytes]
) -> None:
    common = _common(scifact, 3)
    question = " ".join(common)
    view = with_terms(scifact.view(None), common)
    plan = within_fetch_budget(view, common, 10**9, 0)
    assert plan.heads and set(plan.heads) == set(common)
    tight = RouterConfig(budget=RetrievalBudget(max_whole_long_postings=0))
    cold = run_query(scifact, QueryRequest(query=question), tight, today=TODAY).trace["stages"]
    assert cold["bm25"]["truncated"] is True and cold["bm25"]["head_pages"] == len(common)
    assert cold["bm25"]["candidates"]
    roomy = RouterConfig(budget=RetrievalBudget(max_whole_long_postings=10**9))
    fresh = _load(scifact_files)
    whole = run_query(fresh, QueryRequest(query=question), roomy, today=TODAY).trace["stages"]
    assert "head_pages" not in whole["bm25"]
    assert cold["bm25"]["bytes_fetched"] < whole["bm25"]["bytes_fetched"] / 2
    again = run_query(fresh, QueryRequest(query=question), tight, today=TODAY).trace["stages"]
    assert "head_pages" not in again["bm25"]  # the isolate holds the whole lists: used, exact
    assert again["bm25"]["candidates"] == whole["bm25"]["candidates"]
