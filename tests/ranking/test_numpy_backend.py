"""Stage — BM25 with numpy (``bm25_numpy``): the pure scorer's ranking exactly, or the pure scorer.

What CPython serves must be what the Worker serves: ``numpy_top_k`` must return what
``weighted_top_k`` returns — the same ids in the same order with the same floats (``==``, not
approximately) and the same ``truncated`` — on SciFact's test queries (k = 1/3/10/50, without a
filter, with a frozenset and with a ``Mask``, through MaxScore, its windows and the exhaustive
scoring of small queries), on synthetic lists full of ties, and through the cascade on the
golden set; it must hand a query to the pure scorer whenever it cannot guarantee that (a budget
that may cut it, heads, weights of 1 or below 0, a short mask), and step aside when numpy does
not import. What the lexical stage calls in CPython, ``numpy_terms_top_k`` (a query's terms,
their lists found through the view's plans), must rank as the pure scorer over ``query_lists``
does, with repeated and down-weighted terms, lists dropped from the memo and plans dropped.
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Collection, Iterator, Sequence
from dataclasses import replace
from typing import Any

import pytest

from kr.golden import load_golden
from router.analysis.analyzer import AnalyzerConfig
from router.compile.beir import load_beir
from router.compile.indexer import BuildConfig, compile_documents
from router.config import DEFAULT_BM25_CANDIDATES, RetrievalBudget, RouterConfig
from router.package.format.fields import DEFAULT_FIELD_WEIGHTS
from router.package.format.postings import Postings, decode_postings, encode_postings
from router.package.reader import KnowledgePackage, load_package
from router.package.view import PackageView
from router.pipeline import run_query
from router.ranking import numpy_backend as bm25_numpy
from router.ranking import pruning as bm25_pruning
from router.ranking import top_k as front_door
from router.ranking.bm25 import QueryList, block_lists, block_weights, query_lists
from router.ranking.numpy_backend import PostingArrays, numpy_terms_top_k, numpy_top_k
from router.ranking.pruning import weighted_top_k
from router.ranking.result import Ranking
from router.ranking.score_bounds import ScoreBounds
from router.ranking.top_k import served_top_k
from router.results import Mask, Visibility
from router.stages.filters import visible_sections
from tests.common import ALFA, GOLDEN, SHARED_DATA, TODAY, load_all_postings, with_terms

SCIFACT = SHARED_DATA / "scifact"
KS = (1, 3, 10, DEFAULT_BM25_CANDIDATES)


@pytest.fixture
def fallbacks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the queries the numpy scorer, or the front door without numpy, hands to the pure
    one (one entry per hand-over)."""
    seen: list[int] = []
    pure = bm25_numpy.weighted_top_k

    def counted(*args: Any, **kwargs: Any) -> Ranking:
        seen.append(1)
        return pure(*args, **kwargs)

    monkeypatch.setattr(bm25_numpy, "weighted_top_k", counted)
    monkeypatch.setattr(front_door, "weighted_top_k", counted)
    return seen


def assert_same(
    lists: Sequence[QueryList],
    k: int,
    allowed: Collection[int] | None,
    arrays: PostingArrays,
    **options: Any,
) -> Ranking:
    """The numpy scorer's ranking is the pure scorer's: ids, order, floats, ``truncated``."""
    ours = numpy_top_k(lists, k, allowed, arrays=arrays, bounds=ScoreBounds(), **options)
    pure = weighted_top_k(lists, k, allowed, bounds=ScoreBounds(), **options)
    assert ours.ranked == pure.ranked, (k, allowed is None)
    assert ours.truncated == pure.truncated
    # the same Python types too (a response serialises 2 and 2.0 differently)
    assert [tuple(map(type, pair)) for pair in ours.ranked] == [
        tuple(map(type, pair)) for pair in pure.ranked
    ]
    return ours


def assert_planned(
    view: PackageView,
    terms: list[str],
    weights: dict[str, float],
    k: int,
    allowed: Collection[int] | None,
    arrays: PostingArrays,
    term_weights: dict[str, float] | None = None,
) -> Ranking:
    """The lexical stage's numpy ranking of ``terms`` (lists found through the view's plans) is
    the pure scorer's over ``query_lists``: ids, order, floats, ``truncated``."""
    ours = numpy_terms_top_k(
        view, terms, weights, "lucene", k, allowed, term_weights=term_weights, arrays=arrays
    )
    lists = query_lists(view, terms, weights, "lucene", term_weights=term_weights)
    pure = weighted_top_k(lists, k, allowed, bounds=ScoreBounds())
    assert ours.ranked == pure.ranked, (terms, k, allowed is None)
    assert ours.truncated == pure.truncated
    assert [tuple(map(type, pair)) for pair in ours.ranked] == [
        tuple(map(type, pair)) for pair in pure.ranked
    ]
    return ours


def mask_of(sections: int, step: int) -> Mask:
    """Every ``step``-th section visible, as the filters stage builds its masks."""
    return Mask(bytes(1 if s % step == 0 else 0 for s in range(sections)))


# --- SciFact ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scifact() -> tuple[PackageView, list[list[str]]]:
    """SciFact's corpus in the per-field layout (several weighted lists per query term, so
    the reading order and the ties' query-order rule both matter) and its analysed queries."""
    if not SCIFACT.is_dir():
        pytest.skip(f"SciFact not found at {SCIFACT}")
    collection = load_beir(SCIFACT)
    config = BuildConfig(analyzer=AnalyzerConfig(language="english"), scoring="fields")
    files = compile_documents(collection.documents, config).files()
    view = load_all_postings(load_package(files["manifest.json"], files.__getitem__).view(None))
    queries = []
    for text in collection.queries.values():
        terms = view.analyzer.terms(text)
        loaded = with_terms(view, terms)
        queries.append([t for t in terms if loaded.knows(t)])
    return view, queries


def test_scifact_rankings_equal_the_pure_scorer(
    scifact: tuple[PackageView, list[list[str]]], fallbacks: list[int]
) -> None:
    view, queries = scifact
    weights = block_weights(view.block_names, DEFAULT_FIELD_WEIGHTS)
    sections = view.num_sections
    filters = [None, frozenset(range(0, sections, 3)), mask_of(sections, 97)]
    arrays = PostingArrays()
    scored = 0
    for terms in queries:
        lists = query_lists(view, terms, weights, "lucene")
        for k in KS:
            for allowed in filters if k in (3, DEFAULT_BM25_CANDIDATES) else filters[:1]:
                ours = assert_same(lists, k, allowed, arrays)
                scored += not ours.truncated
    assert scored == len(queries) * (2 * len(filters) + 2)
    # a query of too few postings is left to the pure scorer; nearly all are summed by numpy
    assert len(fallbacks) < 0.05 * scored
    assert 0 < arrays.cached_bytes <= arrays.max_bytes


@pytest.mark.parametrize("plans, memo", [(bm25_numpy.PLAN_ENTRIES, None), (16, 64 * 1024)])
def test_scifact_planned_rankings_equal_the_pure_scorer(
    scifact: tuple[PackageView, list[list[str]]],
    monkeypatch: pytest.MonkeyPatch,
    fallbacks: list[int],
    plans: int,
    memo: int | None,
) -> None:
    """What the lexical stage calls: every SciFact query as written, with its terms repeated
    (a term counts as often as it is asked) and with a synonym's lower weight, through the
    view's plans; also with few plans kept (dropped and built again) and a small memo (lists
    dropped and found again through the plan's shards). Only the queries the pure scorer
    answers go through ``query_lists``."""
    view, queries = scifact
    view.derived.pop("bm25_numpy_plans", None)  # none from an earlier test
    monkeypatch.setattr(bm25_numpy, "PLAN_ENTRIES", plans)
    listed: list[int] = []
    listing = bm25_numpy.query_lists

    def counted(*args: Any, **kwargs: Any) -> list[QueryList]:
        listed.append(1)
        return listing(*args, **kwargs)

    monkeypatch.setattr(bm25_numpy, "query_lists", counted)
    weights = block_weights(view.block_names, DEFAULT_FIELD_WEIGHTS)
    sections = view.num_sections
    arrays = PostingArrays() if memo is None else PostingArrays(memo)
    filters = [None, frozenset(range(0, sections, 3)), mask_of(sections, 97)]
    asked = 0
    for i, terms in enumerate(q for q in queries if q):
        variants = [terms, terms + terms[:2]]
        for k in (3, 10) if i % 3 else KS:
            for allowed in filters if k == 10 else filters[:1]:
                for query in variants:
                    assert_planned(view, query, weights, k, allowed, arrays)
                    asked += 1
        assert_planned(view, terms, weights, 10, None, arrays, {terms[0]: 0.4})
        asked += 1
    assert len(listed) == len(fallbacks) < 0.05 * asked
    held = view.derived["bm25_numpy_plans"].held
    assert 0 < sum(len(terms) for terms in held.values()) <= plans
    if memo is not None:
        assert arrays.cached_bytes <= memo


@pytest.mark.parametrize("small, window", [(0, 512), (10**6, 32_768)])
def test_scifact_in_every_summing_order_equals_the_pure_scorer(
    scifact: tuple[PackageView, list[list[str]]],
    monkeypatch: pytest.MonkeyPatch,
    fallbacks: list[int],
    small: int,
    window: int,
) -> None:
    """Every query through MaxScore in windows (reading order), then every query scored
    exhaustively (query order): the numpy scorer follows the pure one's order either way.
    Repeated terms make queries of up to 140 lists here: a budget they surely fit keeps the
    pure scorer from being asked (``_may_truncate`` bounds its lookups by lists × sections)."""
    view, queries = scifact
    monkeypatch.setattr(bm25_pruning, "SMALL_QUERY_POSTINGS", small)
    monkeypatch.setattr(bm25_pruning, "WINDOW_POSTINGS", window)
    monkeypatch.setattr(bm25_numpy, "NUMPY_MIN_POSTINGS", 1)
    weights = block_weights(view.block_names, DEFAULT_FIELD_WEIGHTS)
    arrays = PostingArrays()
    repeated = [terms + terms[: len(terms) // 2] for terms in queries[::4] if terms]
    for terms in repeated:
        lists = query_lists(view, terms, weights, "lucene")
        for k in (1, 10, DEFAULT_BM25_CANDIDATES):
            assert_same(lists, k, None, arrays, max_postings=10**7)
            assert_same(lists, k, mask_of(view.num_sections, 5), arrays, max_postings=10**7)
    assert not fallbacks


def test_scifact_budget_cuts_are_the_pure_scorers(
    scifact: tuple[PackageView, list[list[str]]], fallbacks: list[int]
) -> None:
    """A budget the pure scorer may run out of is left to it: the same cut, ``truncated``
    (a small query, scored exhaustively by the pure scorer, is never cut: numpy sums it)."""
    view, queries = scifact
    weights = block_weights(view.block_names, DEFAULT_FIELD_WEIGHTS)
    arrays = PostingArrays()
    cut = 0
    for terms in queries[:60]:
        lists = query_lists(view, terms, weights, "lucene")
        cut += assert_same(lists, 10, None, arrays, max_postings=1500).truncated
    assert 0 < cut <= len(fallbacks)


# --- synthetic lists full of ties ----------------------------------------------------------------


def tied_blocks(seed: int = 3, sections: int = 300, terms: int = 50) -> dict[str, Postings]:
    """Two blocks whose impacts take three values, so equal scores (and equal bounds) are
    everywhere; lists from 1 posting to nearly every section."""
    rng = random.Random(seed)
    blocks = {}
    for name in ("a", "b"):
        indptr, ids, scores = [0], [], []
        for _ in range(terms):
            members = sorted(rng.sample(range(sections), rng.choice([1, 3, 12, 40, 120, 280])))
            ids += members
            scores += [rng.choice([0.5, 1.0, 2.0]) for _ in members]
            indptr.append(len(ids))
        blocks[name] = decode_postings(encode_postings(indptr, ids, scores, sections))
    return blocks


def tied_queries(seed: int, count: int) -> Iterator[list[int]]:
    rng = random.Random(seed)
    for _ in range(count):
        yield [rng.randrange(50) for _ in range(rng.randint(1, 10))]
    yield from ([7, 7, 7, 2], [2, 7, 2], [11, 11])  # repeated terms weigh the term


@pytest.mark.parametrize("small, window", [(0, 32_768), (0, 64), (10**6, 32_768)])
def test_tied_rankings_equal_the_pure_scorer(
    monkeypatch: pytest.MonkeyPatch, fallbacks: list[int], small: int, window: int
) -> None:
    """Ties broken alike (the first list in query order holding the section, then its id),
    by MaxScore, by its windows and by the exhaustive scoring of small queries."""
    monkeypatch.setattr(bm25_pruning, "SMALL_QUERY_POSTINGS", small)
    monkeypatch.setattr(bm25_pruning, "WINDOW_POSTINGS", window)
    monkeypatch.setattr(bm25_numpy, "NUMPY_MIN_POSTINGS", 1)
    blocks = tied_blocks()
    filters = [None, frozenset(range(0, 300, 7)), mask_of(300, 4)]
    arrays = PostingArrays(max_bytes=4096)  # small: lists get dropped and decoded again
    ties = 0
    for weights in ({"a": 1.0}, {"a": 1.0, "b": 2.5}, {"b": 0.5, "a": 3.0}):
        for ids in tied_queries(seed=len(weights), count=40):
            lists = block_lists(blocks, ids, weights)
            for k in KS:
                for allowed in filters:
                    ranked = assert_same(lists, k, allowed, arrays).ranked
                    ties += len({v for _, v in ranked}) < len(ranked)
    assert ties > 100  # the tie break is exercised
    assert not fallbacks
    assert arrays.cached_bytes <= 4096


def test_more_sections_than_postings_sum_per_section_met(
    monkeypatch: pytest.MonkeyPatch, fallbacks: list[int]
) -> None:
    """A view much larger than the query (a million sections) is summed per distinct section
    met, not per section in view: the same ranking."""
    monkeypatch.setattr(bm25_numpy, "DENSE_SECTIONS", 0)
    monkeypatch.setattr(bm25_numpy, "NUMPY_MIN_POSTINGS", 1)
    space = 100_000
    blocks = {name: replace(block, num_sections=space) for name, block in tied_blocks(5).items()}
    arrays = PostingArrays()
    filters = [None, frozenset(range(0, 300, 3)), mask_of(space, 3)]
    for ids in tied_queries(seed=9, count=30):
        lists = block_lists(blocks, ids, {"a": 1.0, "b": 2.5})
        for k in KS:
            for allowed in filters:
                assert_same(lists, k, allowed, arrays)
    assert not fallbacks


# --- where the pure scorer answers ---------------------------------------------------------------


def test_unsafe_queries_are_left_to_the_pure_scorer(fallbacks: list[int]) -> None:
    blocks = tied_blocks()
    lists = block_lists(blocks, list(range(0, 50, 3)), {"a": 1.0, "b": 2.5})
    arrays = PostingArrays()
    (postings, term, weight), rest = lists[0], lists[1:]
    headed = replace(postings, head=postings)
    cases: list[tuple[list[QueryList], Collection[int] | None, dict[str, int]]] = [
        (lists, None, {"max_postings": 400}),  # the budget may cut it
        ([(postings, term, 1.0), *rest], None, {}),  # a weight of 1: its impacts stay ints
        ([(postings, term, -weight), *rest], None, {}),  # a negative weight
        ([(postings, term, 0.0), *rest], None, {}),  # a weight of 0
        ([(headed, term, weight), *rest], None, {}),  # a head: the threshold algorithm's order
        (lists[:1], None, {}),  # too few postings to be worth numpy
    ]
    for query, allowed, options in cases:
        before = len(fallbacks)
        assert_same(query, 10, allowed, arrays, **options)
        assert len(fallbacks) == before + 1, (allowed, options)
    short = mask_of(100, 2)  # a mask shorter than the view: the pure scorer's error, alike
    with pytest.raises(IndexError):
        weighted_top_k(lists, 10, short)
    with pytest.raises(IndexError):
        numpy_top_k(lists, 10, short)
    assert numpy_top_k(lists, 0) == Ranking([]) and numpy_top_k([], 10) == Ranking([])


def test_without_numpy_the_pure_scorer_serves(
    monkeypatch: pytest.MonkeyPatch, fallbacks: list[int]
) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)  # ``import numpy`` raises ImportError
    monkeypatch.setattr(bm25_numpy, "_numpy", None)
    monkeypatch.setattr(bm25_numpy, "_numpy_tried", False)
    assert not bm25_numpy.numpy_available()
    lists = block_lists(tied_blocks(), list(range(0, 50, 2)), {"a": 1.0, "b": 2.5})
    pure = weighted_top_k(lists, 10, bounds=ScoreBounds())
    assert served_top_k(lists, 10, bounds=ScoreBounds(), arrays=PostingArrays()) == pure
    assert numpy_top_k(lists, 10) == pure
    assert len(fallbacks) == 2


def test_the_core_imports_without_numpy() -> None:
    """numpy is imported on first use, never with the core (the Worker has none)."""
    script = (
        "import sys; sys.modules['numpy'] = None\n"
        "import router.pipeline, router.stages.lexical\n"
        "from router.ranking.numpy_backend import numpy_available\n"
        "assert not numpy_available()\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    probe = "import sys, router.pipeline; print('numpy' in sys.modules)"
    found = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True)
    assert found.stdout.strip() == b"False"


# --- the cascade --------------------------------------------------------------------------------


def _scored(value: Any) -> Any:
    """A response without what depends on time or on what the isolate held already (timings,
    chunks and bytes fetched)."""
    if isinstance(value, dict):
        return {
            k: _scored(v)
            for k, v in value.items()
            if k not in ("ms", "latency_ms", "round_trips") and not k.endswith("_fetched")
        }
    if isinstance(value, list):
        return [_scored(v) for v in value]
    return value


def test_golden_responses_are_the_same_with_and_without_numpy(
    package: KnowledgePackage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every golden query answered through the cascade with numpy and without it: the same
    response (results, scores, answer, trace), timings and fetch counts aside."""
    summed: list[int] = []
    top_k = bm25_numpy._top_k

    def counted(*args: Any) -> Any:
        summed.append(1)
        return top_k(*args)

    monkeypatch.setattr(bm25_numpy, "_top_k", counted)
    monkeypatch.setattr(bm25_numpy, "NUMPY_MIN_POSTINGS", 1)  # the sample's queries are small
    golden = load_golden(GOLDEN)
    # no latency budget: a loaded machine must not cut a stage on one side only
    config = RouterConfig(budget=RetrievalBudget(max_latency_ms=1e9))
    with_numpy = [run_query(package, g.request, config, TODAY).model_dump() for g in golden]
    assert summed  # the numpy scorer did serve
    monkeypatch.setattr(bm25_numpy, "_numpy", None)  # as in the Worker
    without = [run_query(package, g.request, config, TODAY).model_dump() for g in golden]
    for ours, pure, query in zip(with_numpy, without, golden, strict=True):
        assert _scored(ours) == _scored(pure), query.request.query


def test_a_tenant_views_mask_is_read_as_the_pure_scorer_reads_it(
    package: KnowledgePackage, fallbacks: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tenant's view (shared partition + its own), filtered by the day's mask: the lists as
    given, and as the lexical stage finds them (through the view's plans)."""
    monkeypatch.setattr(bm25_numpy, "NUMPY_MIN_POSTINGS", 1)
    view = load_all_postings(package.view(ALFA))
    mask = visible_sections(view, Visibility(ALFA, TODAY))
    assert mask is not None and not all(mask)  # some sections are hidden on that day
    weights = block_weights(view.block_names, DEFAULT_FIELD_WEIGHTS)
    arrays = PostingArrays()
    for g in load_golden(GOLDEN):
        terms = [t for t in view.analyzer.terms(g.request.query) if with_terms(view, [t]).knows(t)]
        lists = query_lists(view, terms, weights, "lucene")
        for k in KS:
            assert_same(lists, k, mask, arrays)
            assert_planned(view, terms, weights, k, mask, arrays)
    # the plans weigh a term by both partitions' postings (the IDF of the tenant's view)
    held = view.derived["bm25_numpy_plans"].held
    assert any(entries and len(entries) == 2 for b in held.values() for _, entries in b.values())
