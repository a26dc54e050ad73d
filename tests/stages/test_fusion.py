"""Stage — rank fusion: reciprocal-rank and weighted fusion, weights, ties."""

from __future__ import annotations

import pytest

from router.stages.fusion import fuse, rrf, weighted_fusion


def test_rrf_orders_by_reciprocal_rank_and_keeps_every_source_score() -> None:
    sources = {"bm25": [(1, 9.0), (2, 4.0)], "vector": [(2, 0.9), (3, 0.8)]}
    fused = rrf(sources, k=60, weights={"bm25": 1.0, "vector": 1.0})
    assert [f.section for f in fused] == [2, 1, 3]
    by_section = {f.section: f for f in fused}
    assert by_section[2].final == pytest.approx(1 / 62 + 1 / 61)
    assert by_section[1].final == pytest.approx(1 / 61)
    assert by_section[3].final == pytest.approx(1 / 62)
    assert by_section[2].scores == {"bm25": 4.0, "vector": 0.9}
    assert by_section[1].scores == {"bm25": 9.0}


def test_rrf_weights_scale_each_sources_vote() -> None:
    sources = {"bm25": [(1, 9.0)], "vector": [(2, 0.9)]}
    fused = rrf(sources, k=60, weights={"bm25": 1.0, "vector": 2.0})
    assert [f.section for f in fused] == [2, 1]
    assert fused[0].final == pytest.approx(2 / 61)


def test_a_source_with_weight_zero_does_not_vote() -> None:
    sources = {"bm25": [(1, 9.0), (2, 4.0)], "keyword": [(2, 1.0), (3, 1.0)]}
    for fused in (
        rrf(sources, k=60, weights={"bm25": 1.0, "keyword": 0.0}),
        weighted_fusion(sources, {"bm25": 1.0, "keyword": 0.0}),
        fuse(sources, "rrf", 60, {"bm25": 1.0}),  # a missing weight counts as 0
    ):
        assert [f.section for f in fused] == [1, 2]
        assert all("keyword" not in f.scores for f in fused)


def test_weighted_fusion_normalises_by_each_sources_best_score() -> None:
    sources = {"bm25": [(1, 10.0), (2, 5.0)], "vector": [(2, 0.5), (3, 0.25)]}
    fused = weighted_fusion(sources, {"bm25": 1.0, "vector": 1.0})
    assert [(f.section, f.final) for f in fused] == [(2, 1.5), (1, 1.0), (3, 0.5)]
    assert fused[0].scores == {"bm25": 5.0, "vector": 0.5}
    assert fuse(sources, "weighted", 60, {"bm25": 1.0, "vector": 1.0})[0].final == 1.5


def test_fusion_ties_break_by_section_and_empty_sources_are_ignored() -> None:
    fused = rrf({"bm25": [], "vector": [(7, 0.5)], "x": [(3, 0.5)]}, 60, {"vector": 1, "x": 1})
    assert [f.section for f in fused] == [3, 7]
    assert fuse({"bm25": [], "vector": []}, "rrf", 60, {"bm25": 1.0}) == []
