"""Long lists' heads and the threshold algorithm: the same top k as exhaustive scoring, exactly."""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence

import pytest

from router.analysis.analyzer import AnalyzerConfig
from router.compile.beir import load_beir
from router.compile.indexer import BuildConfig, compile_documents
from router.errors import PackageFormatError
from router.package.format import shards as shard_format
from router.package.format.fields import DEFAULT_FIELD_WEIGHTS
from router.package.format.postings import Postings
from router.package.format.shards import decode_directory, decode_shard, encode_shards
from router.package.reader import load_package
from router.ranking import pruning as bm25_pruning
from router.ranking.bm25 import QueryList, block_weights, query_lists, top_k, weighted_scores
from router.ranking.pruning import weighted_top_k
from router.ranking.score_bounds import ScoreBounds
from router.ranking.threshold import threshold_top_k
from tests.common import SHARED_DATA, load_all_postings, with_terms

SCIFACT = SHARED_DATA / "scifact"

SECTIONS = 600
TERMS = 40
HEAD_MIN, HEAD = 120, 48  # a head: a quarter of the list, at most 48


def _blocks(seed: int) -> dict[str, tuple[list[int], list[int], list[float]]]:
    """One block of lists from 1 to 500 sections. Impacts mimic BM25: a section's length
    factor times a term-frequency level, from few values, so ties are frequent."""
    rng = random.Random(seed)
    shortness = [rng.choice([0.5, 0.75, 1.0, 1.5, 2.0]) for _ in range(SECTIONS)]
    indptr, ids, impacts = [0], [], []
    for _ in range(TERMS):
        size = rng.choice([1, 3, 20, 90, 150, 300, 500])
        members = sorted(rng.sample(range(SECTIONS), size))
        ids += members
        impacts += [shortness[s] * rng.choice([1.0, 1.0, 1.5, 2.0]) for s in members]
        indptr.append(len(ids))
    return {"bm25f": (indptr, ids, impacts)}


def _lists_of(seed: int) -> list[tuple[Postings, int]]:
    """Every term's (block, local term) once encoded in shards with heads and decoded."""
    directory_blob, files, _ = encode_shards(
        _blocks(seed), TERMS, SECTIONS, target=700, head_min=HEAD_MIN, head=HEAD
    )
    directory = decode_directory(directory_blob)
    found = []
    for shard in range(len(directory.first) - 1):
        decoded = decode_shard(files[directory.file_name(shard)], directory, shard, "shared")
        for term in range(directory.first[shard], directory.first[shard + 1]):
            found.append((decoded["bm25f"], term - directory.first[shard]))
    return found


def _exhaustive(query: Sequence[QueryList], k: int, allowed: Collection[int] | None):  # type: ignore[no-untyped-def]
    return top_k(weighted_scores(query), k, allowed)


def _length(postings: Postings, term: int) -> int:
    return postings.indptr[term + 1] - postings.indptr[term]


def test_a_long_lists_head_holds_its_largest_impacts_in_decreasing_order() -> None:
    lists = _lists_of(3)
    long = [(p, t) for p, t in lists if _length(p, t) >= HEAD_MIN]
    assert long and len(long) < len(lists)
    for postings, term in lists:
        head = postings.head
        assert head is not None  # every shard here holds at least one long list
        start, end = head.indptr[term], head.indptr[term + 1]
        if _length(postings, term) < HEAD_MIN:
            assert start == end
            continue
        low, high = postings.indptr[term], postings.indptr[term + 1]
        stored = sorted(
            zip(postings.scores[low:high], postings.section_ids[low:high], strict=True),
            key=lambda pair: (-pair[0], pair[1]),
        )[: min(HEAD, (high - low) // 4)]
        assert list(zip(head.scores[start:end], head.section_ids[start:end], strict=True)) == stored


@pytest.mark.parametrize("seed", [3, 5, 8])
def test_queries_of_long_lists_equal_exhaustive_scoring_ties_included(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bm25_pruning, "SMALL_QUERY_POSTINGS", 0)
    lists = _lists_of(seed)
    long = [entry for entry in lists if _length(*entry) >= HEAD_MIN]
    short = [entry for entry in lists if _length(*entry) < 30]
    rng = random.Random(seed)
    queries = [rng.sample(long, rng.randint(1, 4)) for _ in range(60)]
    queries += [rng.sample(long, 2) + rng.sample(short, 2) for _ in range(30)]
    queries += [[long[0], long[0]], [long[1]]]  # a repeated term; one common word alone
    subset = frozenset(range(0, SECTIONS, 5))
    ran = fell_back = 0
    for chosen in queries:
        query = [(p, t, rng.choice([1.0, 0.75, 2.5])) for p, t in chosen]
        for k in (1, 3, 10, 50):
            for allowed in (None, subset):
                expected = _exhaustive(query, k, allowed)
                headed = threshold_top_k(query, k, allowed, 10**9)
                if headed is None:
                    fell_back += 1
                else:
                    ran += 1
                    assert not headed.truncated
                    assert headed.ranked == expected, (chosen, k)  # same ids, order and floats
                ranking = weighted_top_k(query, k, allowed, bounds=ScoreBounds())
                assert ranking.ranked == expected, (chosen, k)
    assert ran > fell_back > 0  # mostly the heads decide; too short for k=50 of a filter: MaxScore


def test_it_reads_far_fewer_postings_than_the_lists_hold() -> None:
    lists = _lists_of(5)
    long = sorted((e for e in lists if _length(*e) >= HEAD_MIN), key=lambda e: -_length(*e))
    query = [(p, t, 1.0) for p, t in long[:2]]
    headed = threshold_top_k(query, 3, None, 10**9)
    assert headed is not None and headed.ranked == _exhaustive(query, 3, None)
    assert headed.postings < sum(_length(*e) for e in long[:2]) / 2


def test_a_budget_cut_is_said_and_every_score_returned_is_complete() -> None:
    lists = _lists_of(5)
    long = [(p, t, 1.0) for p, t in lists if _length(p, t) >= HEAD_MIN][:3]
    complete = weighted_scores(long)
    cut = threshold_top_k(long, 10, None, 30)
    assert cut is not None and cut.truncated and 0 < cut.postings <= 30
    assert cut.ranked and all(complete[s] == v for s, v in cut.ranked)


def test_lists_without_heads_leave_the_query_to_maxscore() -> None:
    lists = _lists_of(5)
    short = [(p, t, 1.0) for p, t in lists if _length(p, t) < HEAD_MIN][:4]
    assert threshold_top_k(short, 10, None, 10**9) is None


def test_a_shard_whose_heads_do_not_match_its_directory_is_refused() -> None:
    directory_blob, files, _ = encode_shards(
        _blocks(3), TERMS, SECTIONS, target=10**6, head_min=HEAD_MIN, head=HEAD
    )
    directory = decode_directory(directory_blob)
    blob = files[directory.file_name(0)]
    header = shard_format._SHARD_HEADER
    magic, terms, blocks, heads = header.unpack_from(blob)
    for wrong in (heads + 4, heads - 4, 0):
        broken = header.pack(magic, terms, blocks, wrong) + blob[header.size :]
        with pytest.raises(PackageFormatError):
            decode_shard(broken, directory, 0, "shared")


def test_scifact_common_words_together_equal_exhaustive_scoring(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SciFact built with heads on lists of 256 postings: its 40 commonest words asked alone,
    in pairs and in threes, with and without a filter, rank as exhaustive scoring does."""
    if not SCIFACT.is_dir():
        pytest.skip(f"SciFact not found at {SCIFACT}")
    monkeypatch.setattr(shard_format, "HEAD_MIN_POSTINGS", 256)
    monkeypatch.setattr(shard_format, "HEAD_POSTINGS", 64)
    collection = load_beir(SCIFACT)
    config = BuildConfig(analyzer=AnalyzerConfig(language="english"))
    files = compile_documents(collection.documents, config).files()
    view = load_all_postings(load_package(files["manifest.json"], files.__getitem__).view(None))
    weights = block_weights(view.block_names, DEFAULT_FIELD_WEIGHTS)
    terms = {t for q in collection.queries.values() for t in view.analyzer.terms(q)}
    view = with_terms(view, terms)
    common = sorted((t for t in terms if view.knows(t)), key=view.document_frequency)[-40:]
    rng = random.Random(4)
    queries = [[t] for t in common] + [rng.sample(common, n) for n in (2, 3) for _ in range(40)]
    subset = frozenset(range(0, view.num_sections, 7))
    ran = 0
    for query_terms in queries:
        query = query_lists(view, query_terms, weights, "lucene")
        for k in (10, 50):
            for allowed in (None, subset):
                expected = _exhaustive(query, k, allowed)
                headed = threshold_top_k(query, k, allowed, 10**9)
                if headed is not None:  # summed in query order: the very same floats
                    ran += 1
                    assert headed.ranked == expected, (query_terms, k)
                ranking = weighted_top_k(query, k, allowed, bounds=ScoreBounds())
                assert not ranking.truncated
                assert [s for s, _ in ranking.ranked] == [s for s, _ in expected]
                for (_, ours), (_, theirs) in zip(ranking.ranked, expected, strict=True):
                    assert ours == pytest.approx(theirs, rel=1e-9)  # MaxScore: reading order
    assert ran > len(queries) // 2  # the heads decided many (k=50 of a filter needs more)


def test_a_common_word_alone_is_ranked_from_its_head_ties_included() -> None:
    lists = _lists_of(8)
    long = [(p, t, w) for p, t in lists if _length(p, t) >= HEAD_MIN for w in (1.0, 0.75)]
    subset = frozenset(range(0, SECTIONS, 3))
    for query in long:
        for k, allowed in ((10, None), (10, subset), (5, subset)):
            headed = threshold_top_k([query], k, allowed, 10**9)
            assert headed is not None and headed.postings <= HEAD
            assert headed.ranked == _exhaustive([query], k, allowed)


def test_a_budget_that_cannot_read_a_list_still_completes_the_best_candidates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MaxScore (the heads left out) with a budget below every list's length: it neither reads
    a prefix of a list by section number nor ends empty; it completes the head's sections."""
    monkeypatch.setattr(bm25_pruning, "SMALL_QUERY_POSTINGS", 0)
    monkeypatch.setattr(bm25_pruning, "threshold_top_k", lambda *args: None)
    lists = _lists_of(5)
    long = [(p, t, 1.0) for p, t in lists if _length(p, t) >= 250][:3]
    assert len(long) == 3
    complete = weighted_scores(long)
    ranking = weighted_top_k(long, 10, None, max_postings=200, bounds=ScoreBounds())
    assert ranking.truncated and len(ranking.ranked) == 10
    assert all(complete[s] == pytest.approx(v, rel=1e-12) for s, v in ranking.ranked)
    exact = {s for s, _ in _exhaustive(long, 10, None)}
    assert exact & {s for s, _ in ranking.ranked}  # the heads' sections are the right ones
