"""Typed configs refuse values that cannot be meant, naming the field and what it allows."""

from __future__ import annotations

import re

import pytest

from router.analysis.analyzer import AnalyzerConfig
from router.compile.indexer import BM25Params, BuildConfig
from router.config import RetrievalBudget, RouterConfig
from router.errors import ConfigError, RouterError
from router.stages.fusion import fuse


@pytest.mark.parametrize(
    ("kwargs", "field", "allowed"),
    [
        ({"fusion": "weigthed"}, "fusion", "'rrf', 'weighted'"),
        ({"top_k": 0}, "top_k", ">= 1"),
        ({"bm25_candidates": -5}, "bm25_candidates", ">= 1"),
        ({"answer_sentences": 2.5}, "answer_sentences", "whole number"),
        ({"rrf_k": 0}, "rrf_k", ">= 1"),
        ({"graph_depth": -1}, "graph_depth", ">= 0"),
        ({"high_confidence": 1.2}, "high_confidence", "<= 1.0"),
        ({"min_coverage": float("nan")}, "min_coverage", ">= 0.0"),
        ({"source_weights": {"bm26": 1.0}}, "source_weights", "keyword, bm25, vector"),
        ({"source_weights": {"bm25": -1.0}}, "source_weights['bm25']", ">= 0.0"),
        ({"field_weights": {"titel": 2.0}}, "field_weights", "title"),
        ({"trust_weights": {"oficial": 1.0}}, "trust_weights", "official"),
        ({"top_k_by_level": {"HIGH": 0}}, "top_k_by_level['HIGH']", ">= 1"),
        ({"top_k_by_level": {"SURE": 3}}, "top_k_by_level", "HIGH, MEDIUM, LOW"),
        ({"vector_weight_by_level": {"NONE": 1.0}}, "vector_weight_by_level", "HIGH"),
        ({"context_boost": -0.1}, "context_boost", ">= 0.0"),
    ],
)
def test_router_config_refuses_bad_values(kwargs: dict, field: str, allowed: str) -> None:
    with pytest.raises(ConfigError) as info:
        RouterConfig(**kwargs)
    assert f"RouterConfig.{field}" in info.value.message
    assert allowed in info.value.message
    assert isinstance(info.value, RouterError)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"high_confidence": 0.2}, "high_confidence=0.2 is below medium_confidence=0.25"),
        ({"medium_confidence": 0.2}, "medium_confidence=0.2 is below abstain_below=0.25"),
        ({"abstain_below": 0.3}, "medium_confidence=0.25 is below abstain_below=0.3"),
    ],
)
def test_thresholds_must_be_ordered(kwargs: dict, named: str) -> None:
    with pytest.raises(ConfigError, match="high_confidence >= medium_confidence >= abstain_below"):
        RouterConfig(**kwargs)
    with pytest.raises(ConfigError, match=named):
        RouterConfig(**kwargs)


def test_equal_thresholds_and_zero_graph_are_allowed() -> None:
    config = RouterConfig(
        high_confidence=0.5, medium_confidence=0.5, abstain_below=0.5, graph_depth=0, graph_seeds=0
    )
    assert config.medium_confidence == config.high_confidence


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_documents": 0}, "max_documents"),
        ({"max_vector_results": -1}, "max_vector_results"),
        ({"max_graph_nodes": -1}, "max_graph_nodes"),
        ({"max_latency_ms": 0}, "max_latency_ms"),
    ],
)
def test_budget_refuses_non_positive_sizes(kwargs: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"RetrievalBudget.{field}")):
        RetrievalBudget(**kwargs)


def test_build_config_refuses_bad_values() -> None:
    with pytest.raises(
        ConfigError, match=re.escape("BuildConfig.scoring must be one of 'fields', 'bm25f'")
    ):
        BuildConfig(scoring="bm25x")
    with pytest.raises(ConfigError, match=r"BuildConfig.field_weights\['body'\]"):
        BuildConfig(field_weights={"body": -1.0})
    with pytest.raises(ConfigError, match="unknown keys \\['bodyy'\\]"):
        BuildConfig(field_weights={"bodyy": 1.0})
    with pytest.raises(ConfigError, match="at least one weight above 0"):
        BuildConfig(field_weights={"body": 0.0})
    # BM25L / BM25+ score absent terms too: sparse postings cannot hold them
    with pytest.raises(ConfigError, match=re.escape("BM25Params.method must be one of 'lucene'")):
        BM25Params(method="bm25+")
    with pytest.raises(ConfigError, match=re.escape("BM25Params.b")):
        BM25Params(b=1.5)
    with pytest.raises(ConfigError, match=re.escape("AnalyzerConfig.language")):
        AnalyzerConfig(language="klingon")
    with pytest.raises(ConfigError, match=re.escape("AnalyzerConfig.min_word_length")):
        AnalyzerConfig(min_word_length=0)


def test_fusion_selector_raises_on_unknown_method() -> None:
    sources = {"bm25": [(1, 2.0)], "vector": [(2, 0.9)]}
    with pytest.raises(ConfigError, match="'rrf', 'weighted'"):
        fuse(sources, "weigthed", 60, {"bm25": 1.0, "vector": 1.0})
    assert [f.section for f in fuse(sources, "rrf", 60, {"bm25": 1.0, "vector": 0.5})] == [1, 2]
