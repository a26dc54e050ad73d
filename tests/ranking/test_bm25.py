"""Stage — BM25: the pruned top-k (``weighted_top_k``) against exhaustive scoring.

The reference is ``top_k(weighted_scores(...))``: every posting of every query term summed, then
the k best, ties in insertion order. The pruned scorer must return the same ids in the same order
with the same scores — on SciFact's test queries (both layouts, k=10 and the cascade's k=50), on
every golden query of the sample knowledge, with and without a tenant filter, with repeated query
terms, and on a synthetic block built to be full of ties. Its postings budget must say when it cut
the scoring short.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Collection, Mapping, Sequence

import pytest

from kr.golden import load_golden
from router.analysis.analyzer import AnalyzerConfig
from router.compile.beir import load_beir
from router.compile.corpus import load_knowledge
from router.compile.indexer import BuildConfig, compile_documents
from router.config import DEFAULT_BM25_CANDIDATES, RetrievalBudget, RouterConfig
from router.contract import QueryRequest
from router.package.format.fields import DEFAULT_FIELD_WEIGHTS
from router.package.format.postings import Postings, decode_postings, encode_postings
from router.package.reader import KnowledgePackage, load_package
from router.package.view import PackageView
from router.pipeline import run_query
from router.ranking import pruning as bm25_pruning
from router.ranking.bm25 import (
    QueryList,
    block_lists,
    block_weights,
    query_lists,
    top_k,
    weighted_scores,
)
from router.ranking.pruning import weighted_top_k as top_k_of_lists
from router.ranking.result import Ranking
from router.ranking.score_bounds import ScoreBounds
from router.results import Visibility
from router.stages.filters import visible_sections
from tests.common import (
    ALFA,
    BETA,
    GOLDEN,
    KNOWLEDGE,
    SHARED_DATA,
    TODAY,
    load_all_postings,
    with_terms,
)

SCIFACT = SHARED_DATA / "scifact"
KS = (10, DEFAULT_BM25_CANDIDATES)  # the benchmark's k and the cascade's
REL = 1e-9  # sums in reading order vs query order: the last bits at most (they are equal here)


@pytest.fixture(autouse=True)
def always_prune(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small queries are scored exhaustively in production; here every query goes through the
    pruning, so that the small corpora test it too."""
    monkeypatch.setattr(bm25_pruning, "SMALL_QUERY_POSTINGS", 0)


def weighted_top_k(
    blocks: Mapping[str, Postings],
    ids: Sequence[int],
    weights: Mapping[str, float],
    k: int,
    allowed: Collection[int] | None = None,
    **options: object,
) -> Ranking:
    """The pruned scorer over term ids of named blocks, impacts as stored (weight × count)."""
    return top_k_of_lists(block_lists(blocks, ids, weights), k, allowed, **options)  # type: ignore[arg-type]


def exhaustive_lists(
    lists: Sequence[QueryList], k: int, allowed: Collection[int] | None
) -> list[tuple[int, float]]:
    return top_k(weighted_scores(lists), k, allowed) if lists else []


def exhaustive(
    blocks: Mapping[str, Postings],
    ids: Sequence[int],
    weights: Mapping[str, float],
    k: int,
    allowed: Collection[int] | None,
) -> list[tuple[int, float]]:
    return exhaustive_lists(block_lists(blocks, ids, weights), k, allowed) if ids else []


def assert_same(
    ours: list[tuple[int, float]], reference: list[tuple[int, float]], what: object
) -> None:
    assert [s for s, _ in ours] == [s for s, _ in reference], what
    for (_, mine), (_, theirs) in zip(ours, reference, strict=True):
        assert abs(mine - theirs) <= REL * theirs, what


def compare_all(
    view: PackageView,
    queries: Sequence[Sequence[str]],
    weights: Mapping[str, float],
    filters: Sequence[Collection[int] | None],
    bounds: ScoreBounds,
) -> dict[tuple[int, int], float]:
    """Every query (analysed terms, BM25 IDF of the view) × k × filter against the reference;
    per (k, filter index), the postings ours read as a fraction of what exhaustive scoring reads."""
    read: Counter[tuple[int, int]] = Counter()
    total = 0
    for terms in queries:
        lists = query_lists(view, terms, weights, "lucene")
        total += sum(p.indptr[t + 1] - p.indptr[t] for p, t, _ in lists)
        for k in KS:
            for f, allowed in enumerate(filters):
                ranking = top_k_of_lists(lists, k, allowed, bounds=bounds)
                assert not ranking.truncated
                assert_same(ranking.ranked, exhaustive_lists(lists, k, allowed), (terms, k))
                read[k, f] += ranking.postings
    return {key: n / total for key, n in read.items()}


def _load(documents, config: BuildConfig) -> KnowledgePackage:  # type: ignore[no-untyped-def]
    files = compile_documents(documents, config).files()
    return load_package(files["manifest.json"], files.__getitem__)


def _known(view: PackageView, text: str) -> list[str]:
    """A query's analysed terms that the view indexes (repeats kept, as bm25s counts them)."""
    terms = view.analyzer.terms(text)
    loaded = with_terms(view, terms)
    return [t for t in terms if loaded.knows(t)]


# --- a synthetic block full of ties ---------------------------------------------------------------


def synthetic_blocks(seed: int = 7, sections: int = 400, terms: int = 60) -> dict[str, Postings]:
    """Two blocks whose impacts come from four values, so equal scores are everywhere; list
    lengths from 1 to most sections, so some lists are long enough for per-section bounds."""
    rng = random.Random(seed)
    blocks = {}
    for name in ("a", "b"):
        indptr, ids, scores = [0], [], []
        for _ in range(terms):
            size = rng.choice([1, 2, 5, 20, 60, 150, 300])
            members = sorted(rng.sample(range(sections), size))
            ids += members
            scores += [rng.choice([0.5, 1.0, 1.25, 2.0]) for _ in members]
            indptr.append(len(ids))
        blocks[name] = decode_postings(encode_postings(indptr, ids, scores, sections))
    return blocks


def test_synthetic_ties_equal_exhaustive_scoring_in_the_same_order() -> None:
    blocks = synthetic_blocks()
    rng = random.Random(11)
    queries = [[rng.randrange(60) for _ in range(rng.randint(1, 12))] for _ in range(150)]
    queries += [[3, 3, 3, 9], [9, 3, 3, 9]]  # repeated terms weigh the term
    subset = frozenset(range(0, 400, 7))
    for weights in ({"a": 1.0}, {"a": 1.0, "b": 2.5}, {"b": 0.5, "a": 3.0}):
        bounds = ScoreBounds()  # kept across queries: per-section bytes get built and reused
        for k in (1, 3, *KS):
            for allowed in (None, subset):
                for ids in queries:
                    expected = exhaustive(blocks, ids, weights, k, allowed)
                    assert weighted_top_k(
                        blocks, ids, weights, k, allowed, bounds=bounds
                    ).ranked == (expected), (weights, k, ids)
                    assert weighted_top_k(blocks, ids, weights, k, allowed).ranked == expected


@pytest.mark.parametrize("window", [1, 64, 500])
def test_windows_of_section_numbers_rank_as_one_search(
    monkeypatch: pytest.MonkeyPatch, window: int
) -> None:
    """Scored window by window (a query of common words at a million sections), the ranking is
    exhaustive scoring's, ties, filters and repeated terms included, and each window's search
    starts from the k-th score of the windows before it."""
    monkeypatch.setattr(bm25_pruning, "WINDOW_POSTINGS", window)
    monkeypatch.setattr(bm25_pruning, "SMALL_QUERY_POSTINGS", 0)
    blocks = synthetic_blocks()
    rng = random.Random(5)
    queries = [[rng.randrange(60) for _ in range(rng.randint(2, 12))] for _ in range(60)]
    subset = frozenset(range(0, 400, 7))
    for weights in ({"a": 1.0}, {"a": 1.0, "b": 2.5}):
        bounds = ScoreBounds()
        for k in (1, 3, *KS):
            for allowed in (None, subset):
                for ids in [*queries, [3, 3, 3, 9]]:
                    expected = exhaustive(blocks, ids, weights, k, allowed)
                    ranking = weighted_top_k(blocks, ids, weights, k, allowed, bounds=bounds)
                    assert ranking.ranked == expected, (weights, k, ids)
                    assert not ranking.truncated


def test_a_budget_cut_in_windows_favours_no_range_of_sections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two lists over every section whose best impacts are at the highest section numbers,
    with a budget of half their postings: each window is cut alike, so the best sections are
    still found and complete, not the lowest numbers a prefix read would favour."""
    monkeypatch.setattr(bm25_pruning, "WINDOW_POSTINGS", 500)
    size = 4000
    impacts = [0.25 + s / size for s in range(size)]
    indptr = [0, size, 2 * size]
    encoded = encode_postings(indptr, [*range(size), *range(size)], impacts + impacts, size)
    blocks = {"a": decode_postings(encoded)}
    ranking = weighted_top_k(blocks, [0, 1], {"a": 1.0}, 3, max_postings=size)
    assert ranking.truncated and ranking.postings <= size
    assert ranking.ranked == exhaustive(blocks, [0, 1], {"a": 1.0}, 3, None)


def test_later_windows_are_pruned_by_the_earlier_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rare term's few high impacts are all in the first window; once they are the top k,
    the later windows, where only low impacts are left, read nothing: the windows cost no more
    postings than one search over all the lists."""
    indptr, ids, scores = [0], [], []
    for members, impact in (([1, 2, 3, 4, 5], 10.0), (range(0, 4000, 2), 0.5), (range(4000), 0.25)):
        ids += list(members)
        scores += [impact] * len(members)
        indptr.append(len(ids))
    blocks = {"a": decode_postings(encode_postings(indptr, ids, scores, 4000))}
    query, weights = [0, 1, 2], {"a": 1.0}
    expected = exhaustive(blocks, query, weights, 3, None)
    whole = weighted_top_k(blocks, query, weights, 3, bounds=ScoreBounds(max_bytes=0))
    monkeypatch.setattr(bm25_pruning, "WINDOW_POSTINGS", 600)
    windows = weighted_top_k(blocks, query, weights, 3, bounds=ScoreBounds(max_bytes=0))
    assert whole.ranked == windows.ranked == expected
    assert windows.postings <= whole.postings < len(ids) // 100


def test_pruning_reads_fewer_postings_than_exhaustive_scoring() -> None:
    # term 0: five sections with a high impact; terms 1-3: long lists of low impacts
    indptr, ids, scores = [0], [], []
    for members, impact in (
        ([7, 40, 90, 200, 333], 10.0),
        *((range(0, 400, 1 + t), 0.5) for t in range(3)),
    ):
        ids += list(members)
        scores += [impact] * len(members)
        indptr.append(len(ids))
    blocks = {"a": decode_postings(encode_postings(indptr, ids, scores, 400))}
    query, weights = [0, 1, 2, 3], {"a": 1.0}
    bounds = ScoreBounds()
    cold = weighted_top_k(blocks, query, weights, 3, bounds=bounds)  # builds the long lists' bytes
    warm = weighted_top_k(blocks, query, weights, 3, bounds=bounds)
    assert cold.ranked == warm.ranked == exhaustive(blocks, query, weights, 3, None)
    assert warm.postings < 40 < len(ids) < cold.postings  # building the bytes is counted too


def test_small_queries_are_scored_exhaustively(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bm25_pruning, "SMALL_QUERY_POSTINGS", 10**6)
    blocks = synthetic_blocks()
    weights = {"a": 1.0, "b": 2.5}
    ids = [3, 3, 9, 17]
    total = sum(blocks[b].indptr[t + 1] - blocks[b].indptr[t] for b in weights for t in set(ids))
    ranking = weighted_top_k(blocks, ids, weights, 10, bounds=ScoreBounds())
    assert ranking == Ranking(exhaustive(blocks, ids, weights, 10, None), False, total)


def test_no_terms_or_no_k_give_an_empty_ranking() -> None:
    blocks = synthetic_blocks()
    assert weighted_top_k(blocks, [], {"a": 1.0}, 10) == Ranking([])
    assert weighted_top_k(blocks, [1, 2], {"a": 1.0}, 0) == Ranking([])


# --- the postings budget --------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [0, 1, 40, 400, 1500])
def test_a_budget_cut_says_truncated_and_returns_complete_scores(budget: int) -> None:
    blocks = synthetic_blocks()
    weights = {"a": 1.0, "b": 2.5}
    ids = list(range(0, 60, 2))
    full = weighted_scores(block_lists(blocks, ids, weights))
    ranking = weighted_top_k(blocks, ids, weights, 10, max_postings=budget)
    assert ranking.truncated
    assert ranking.postings <= budget
    assert len(ranking.ranked) <= 10
    for section, score in ranking.ranked:  # whatever it returns is scored completely
        assert score == pytest.approx(full[section], rel=REL)
    assert [v for _, v in ranking.ranked] == sorted((v for _, v in ranking.ranked), reverse=True)


def test_a_budget_large_enough_is_not_reported() -> None:
    blocks = synthetic_blocks()
    weights = {"a": 1.0, "b": 2.5}
    ids = list(range(0, 60, 2))
    ranking = weighted_top_k(blocks, ids, weights, 10, max_postings=10**6)
    assert not ranking.truncated
    assert ranking.ranked == exhaustive(blocks, ids, weights, 10, None)


def test_the_bm25_trace_reports_truncation_only_when_it_happens(package: KnowledgePackage) -> None:
    request = QueryRequest(query="como renovar uma permissão de trabalho vencida")
    stage = run_query(package, request, today=TODAY).trace["stages"]["bm25"]
    assert "truncated" not in stage and {"query_terms", "fields", "candidates"} <= set(stage)
    tight = RouterConfig(budget=RetrievalBudget(max_postings=3))  # the configured budget
    stage = run_query(package, request, tight, today=TODAY).trace["stages"]["bm25"]
    assert stage["truncated"] is True
    assert len(stage["candidates"]) <= 3


def test_per_section_bounds_keep_within_their_memory() -> None:
    blocks = synthetic_blocks()
    block = blocks["a"]
    bounds = ScoreBounds(max_bytes=2 * block.num_sections)
    long_terms = [t for t in range(60) if block.indptr[t + 1] - block.indptr[t] >= 150][:3]
    assert len(long_terms) == 3
    for term in long_terms:
        levels = bounds.build_sections(block, term, block.indptr[term], block.indptr[term + 1])
        assert levels is not None and len(levels) == block.num_sections
    assert bounds.cached_sections(block, long_terms[0]) is None  # the oldest was dropped
    assert all(bounds.cached_sections(block, t) is not None for t in long_terms[1:])
    short = next(t for t in range(60) if block.indptr[t + 1] - block.indptr[t] <= 2)
    assert bounds.build_sections(block, short, block.indptr[short], block.indptr[short + 1]) is None


# --- SciFact --------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["fields", "bm25f"])
def scifact(request: pytest.FixtureRequest) -> tuple[PackageView, list[list[str]]]:
    if not SCIFACT.is_dir():
        pytest.skip(f"SciFact not found at {SCIFACT}")
    collection = load_beir(SCIFACT)
    config = BuildConfig(analyzer=AnalyzerConfig(language="english"), scoring=request.param)
    view = load_all_postings(_load(collection.documents, config).view(None))
    queries = [_known(view, q) for q in collection.queries.values()]
    return view, queries


def test_scifact_top10_and_top50_equal_exhaustive_scoring(
    scifact: tuple[PackageView, list[list[str]]],
) -> None:
    package, queries = scifact
    weights = block_weights(package.block_names, DEFAULT_FIELD_WEIGHTS)
    sections = package.num_sections
    filters = [None, frozenset(range(0, sections, 3)), frozenset(range(0, sections, 97))]
    assert sum(len(ids) != len(set(ids)) for ids in queries) > 50  # repeated terms are covered
    read = compare_all(package, queries, weights, filters, ScoreBounds())
    # and it prunes: ~35 % of the postings at k=10, ~45-55 % at k=50 (a filter leaving 1 % of the
    # sections visible leaves little to prune: those few are scored nearly exhaustively)
    ceilings = {10: 0.45, DEFAULT_BM25_CANDIDATES: 0.65}
    assert all(read[k, f] < ceilings[k] for k in KS for f in (0, 1)), sorted(read.items())


def test_scifact_in_windows_equals_exhaustive_scoring(
    scifact: tuple[PackageView, list[list[str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    package, queries = scifact
    monkeypatch.setattr(bm25_pruning, "WINDOW_POSTINGS", 512)
    weights = block_weights(package.block_names, DEFAULT_FIELD_WEIGHTS)
    sections = package.num_sections
    compare_all(package, queries, weights, [None, frozenset(range(0, sections, 3))], ScoreBounds())


def test_scifact_queries_with_repeated_terms_equal_exhaustive_scoring(
    scifact: tuple[PackageView, list[list[str]]],
) -> None:
    package, queries = scifact
    weights = block_weights(package.block_names, DEFAULT_FIELD_WEIGHTS)
    repeated = [terms + terms[: len(terms) // 2] for terms in queries[::5] if terms]
    compare_all(package, repeated, weights, [None], ScoreBounds())


def test_scifact_common_words_asked_alone_equal_exhaustive_scoring(
    scifact: tuple[PackageView, list[list[str]]],
) -> None:
    """One long list (a common word asked alone, or twice) is ranked by its largest impacts in
    a heap of k, never a score per section: the same ids and scores as exhaustive scoring."""
    package, queries = scifact
    weights = block_weights(package.block_names, DEFAULT_FIELD_WEIGHTS)
    distinct = sorted({t for terms in queries for t in terms})
    common = sorted(distinct, key=package.document_frequency, reverse=True)[:40]
    assert package.document_frequency(common[-1]) > 1024  # past the exhaustive shortcut
    sections = package.num_sections
    filters = [None, frozenset(range(0, sections, 7))]
    compare_all(
        package,
        [[t] for t in common] + [[t, t] for t in common[:5]],
        weights,
        filters,
        ScoreBounds(),
    )
    lists = query_lists(package, [common[0]], weights, "lucene")
    if len(lists) == 1:  # the BM25F layout: one list; its budget cut is said
        cut = top_k_of_lists(lists, 10, None, bounds=ScoreBounds(), max_postings=500)
        assert cut.truncated and cut.postings == 500 and len(cut.ranked) == 10


# --- the sample knowledge and its golden queries --------------------------------------------------


@pytest.mark.parametrize("scoring", ["bm25f", "fields"])
def test_every_golden_query_equals_exhaustive_scoring(scoring: str) -> None:
    package = _load(load_knowledge(KNOWLEDGE).documents, BuildConfig(scoring=scoring))
    golden = load_golden(GOLDEN)
    for tenant in (None, ALFA, BETA):  # each tenant's view: shared + its own partition
        view = load_all_postings(package.view(tenant))
        weights = block_weights(view.block_names, DEFAULT_FIELD_WEIGHTS)
        filters = [None, visible_sections(view, Visibility(tenant, TODAY))]
        queries = [_known(view, g.query) for g in golden]
        assert sum(bool(terms) for terms in queries) >= 80
        compare_all(view, queries, weights, filters, ScoreBounds())
