"""bench/scale.py: fetches are summed over every stage that reports them (a new stage counts
without a change), cached responses are left out, and the query set is deterministic and
deduplicated."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.scale import (
    REQUEST_FIELDS,
    budget_loss,
    fetch_cost,
    fetch_summary,
    load_queries,
    request_body,
    stage_times,
)
from bench.synthetic_corpus import CorpusSpec, generate

from router.adapters.local.state import LocalState
from router.contract import QueryRequest
from router.sync import run_sync


def test_fetches_are_summed_over_every_stage_that_reports_them() -> None:
    stages = {
        "bm25": {"ms": 1.0, "candidates": []},
        "texts": {"ms": 2.0, "chunks_fetched": 2, "bytes_fetched": 300, "round_trips": 1},
        "shards": {"ms": 0.5, "bytes": 40, "round_trips": 2},  # a stage that does not exist yet
        "vector": {"ms": 0.0, "skipped": "no embedder"},
    }
    assert fetch_cost(stages) == (340, 3, {"texts": 300, "shards": 40})


def test_cached_responses_are_left_out_of_the_fetches() -> None:
    fetched = {"stages": {"texts": {"bytes_fetched": 100, "round_trips": 1}}}
    cached = {**fetched, "served_from_cache": "memory"}
    summary = fetch_summary([fetched, cached, {"stages": {}}])
    assert summary["cached_left_out"] == 1
    assert summary["bytes"]["n"] == 2
    assert summary["bytes"]["max"] == 100
    assert summary["round_trips"]["mean"] == 0.5


def test_stage_times_rank_stages_by_total_time_and_count_only_where_they_ran() -> None:
    traces = [
        {"stages": {"bm25": {"ms": 4.0}, "texts": {"ms": 1.0}}},
        {"stages": {"bm25": {"ms": 2.0}, "graph": {"ms": 9.0, "skipped": False}}},
        {"stages": {"fusion": "not a stage", "texts": {"ms": 3.0}}},
    ]
    times = stage_times(traces)
    assert list(times) == ["graph", "bm25", "texts"]  # 9, 6 and 4 ms in all
    assert times["bm25"]["p50"] == 3.0 and times["bm25"]["n"] == 2
    assert times["graph"]["n"] == 1


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("scale") / "corpus"
    generate(CorpusSpec(sections=300, seed=3, tenants=3), root)
    return root


def test_the_query_set_is_deterministic_unique_and_topped_up(corpus: Path) -> None:
    rows = load_queries(corpus, topical=30, seed=1)
    assert rows == load_queries(corpus, topical=30, seed=1)
    keys = [(r["query"], *(r.get(f) for f in REQUEST_FIELDS)) for r in rows]
    assert len(set(keys)) == len(keys)
    topical = [r for r in rows if r["category"].startswith("topical_")]
    assert 25 <= len(topical) <= 30
    assert {r["category"] for r in topical} == {"topical_heading", "topical_phrase"}
    assert all(r["query"] and "[[" not in r["query"] and "{#" not in r["query"] for r in topical)
    body = request_body({**rows[0], "tenant": None, "page": None})
    assert set(body) <= {"query", *REQUEST_FIELDS} and "tenant" not in body


def test_the_budget_loss_compares_cut_queries_with_their_exact_ranking(state: LocalState) -> None:
    """On the sample knowledge nothing is cut by the default budget; a budget of 20 postings
    cuts the long queries, and their top 10 is compared with the exact one."""
    requests = [QueryRequest(query=q) for q in ("permissão de trabalho em altura", "APR", "EPI")]
    assert run_sync(budget_loss(state.root, requests))["truncated"] == 0
    cut = run_sync(budget_loss(state.root, requests, max_postings=20))
    assert cut["truncated"] >= 1 and cut["queries"] == 3
    assert 0 <= cut["top10_overlap_min"] <= cut["top10_overlap_mean"] <= 1
    assert cut["top10_overlap_min"] < 1  # 20 postings cannot rank the long query exactly
