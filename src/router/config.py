"""Typed runtime configuration with named defaults, checked on construction.

Why one place: every threshold that changes a ranking or an abstention is a named, documented
default here, tuned only on training data (the golden set, SciFact train). A value that cannot be
meant (an unknown fusion method, thresholds out of order, a size of zero) raises ``ConfigError``
naming the field when the config is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from router.calibration import (
    DEFAULT_CONFIDENCE_MODEL,
    VECTOR_EVIDENCE_MODELS,
    ConfidenceModel,
    VectorEvidenceModel,
)
from router.checks import (
    check_choice,
    check_count,
    check_keys,
    check_order,
    check_range,
    check_weights,
)
from router.contract import LEVELS
from router.errors import ConfigError
from router.knowledge.model import TRUST_LEVELS
from router.package.format.fields import BM25F_BLOCK, DEFAULT_FIELD_WEIGHTS, FIELD_NAMES

__all__ = [
    "DEFAULT_CACHE_ENTRIES",
    "DEFAULT_RERANK_CANDIDATES",
    "DEFAULT_TOP_K",
    "FUSION_METHODS",
    "MAX_RERANK_CANDIDATES",
    "SOURCE_NAMES",
    "FusionMethod",
    "RetrievalBudget",
    "RouterConfig",
]

FusionMethod = Literal["rrf", "weighted"]
FUSION_METHODS: tuple[FusionMethod, ...] = ("rrf", "weighted")
# Ranked sources that may vote in fusion (exact hits are pinned, graph nodes annotate).
SOURCE_NAMES = ("keyword", "bm25", "vector")

DEFAULT_TOP_K = 5
# Candidate pool the BM25 stage keeps before filters and answer selection.
DEFAULT_BM25_CANDIDATES = 50
# The lexical confidence is P(top result relevant) (router.calibration, ADR 0014),
# HIGH / MEDIUM at or above these. HIGH at 0.5: the vector stage still runs on ~40% of SciFact
# train questions, as tuned in ADR 0006, and the top result of a HIGH one is relevant 80% of
# the time there (79% on SciFact test, held out). LOW (P < 0.25) abstains after the corrective
# expansion (seed 001 §8.6) unless a close vector match lifts it.
DEFAULT_HIGH_CONFIDENCE = 0.5
DEFAULT_MEDIUM_CONFIDENCE = 0.25
# Below this probability, or when the best section holds under this share of the question's
# terms, the router abstains instead of returning the "least bad" passage.
DEFAULT_ABSTAIN_BELOW = 0.25
DEFAULT_MIN_COVERAGE = 0.5
# ... or when it holds under this share of the question's specificity (its terms' idf in the
# caller's view) and lacks a term the view does not know at all (docs/adr/0023): common words
# matched ("prazo", "empresa") do not make up for the concept missing ("estagiário"). Chosen
# across two domains: the lowest value declining every out-of-scope question of helpdesk-pt
# (0.45) also declines all of the golden set's; the golden set's own (0.4) leaves 2 of 10 of
# helpdesk-pt's answered.
DEFAULT_MIN_SPECIFIC_COVERAGE = 0.45
# What a synonym the corrective expansion added weighs in BM25, against 1 for the user's own
# terms. Why lower (knowledge-format: a synonym matches "at a lower weight than an exact term"):
# a group adds several terms at once ("APR" → "análise preliminar de risco"), and at full weight
# they outvoted the rest of the question and pulled it to the document that names the group
# (docs/adr/0016).
DEFAULT_SYNONYM_WEIGHT = 0.5
# Sentences quoted in an extractive answer, and how many sections they may come from.
DEFAULT_ANSWER_SENTENCES = 3
DEFAULT_ANSWER_SECTIONS = 2
# Sections of the answering document whose sentences an answer may quote: the ranked ones, then
# the others in reading order (the value is often stated under a section ranked lower).
DEFAULT_ANSWER_DOCUMENT_SECTIONS = 12
# Graph expansion (PRD §15): neighbours of the best few sections, depth 1, at most 10 nodes.
DEFAULT_GRAPH_SEEDS = 3
DEFAULT_GRAPH_DEPTH = 1
DEFAULT_GRAPH_MAX_NODES = 10
# Vector fallback: how many nearest sections to ask for (the 11th and later are the question's
# background similarity), and the probability that the best match is relevant (the embedding
# model's fitted ``VectorEvidenceModel``, router.calibration) above which a vector match lifts a
# lexical abstention. 0.7: on the domain the e5 model was not fitted on, about 0.8 of what it
# lifts is relevant (bench/README.md, "Vector evidence").
DEFAULT_VECTOR_TOP_K = 50
DEFAULT_VECTOR_RESCUE_PROBABILITY = 0.7
# Below it, a match still counts as evidence the agent gets (declined, LOW, PRD §22) from 0.3.
DEFAULT_VECTOR_EVIDENCE_PROBABILITY = 0.3
# Fusion (PRD §18): reciprocal rank fusion constant, per-source weights (tuned on the golden set:
# a source at weight 0 — keyword by default, graph always — annotates and appends, never votes).
DEFAULT_RRF_K = 60
DEFAULT_SOURCE_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {"keyword": 0.0, "bm25": 1.0, "vector": 1.0}
)
# How much the vector list weighs in fusion, per lexical confidence level: on MEDIUM the lexical
# ranking already holds evidence, so vectors mostly add recall; on LOW they lead as much as BM25.
DEFAULT_VECTOR_WEIGHT_BY_LEVEL: Mapping[str, float] = MappingProxyType(
    {"HIGH": 1.0, "MEDIUM": 1.0, "LOW": 1.0}
)
# Adaptive top-K (PRD §22).
DEFAULT_TOP_K_BY_LEVEL: Mapping[str, int] = MappingProxyType({"HIGH": 3, "MEDIUM": 8, "LOW": 15})
# Trust ordering (PRD §37): multiplier of each source's scores before fusion (ADR 0006).
DEFAULT_TRUST_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {"official": 1.0, "verified": 0.95, "generated": 0.85, "draft": 0.7, "deprecated": 0.5}
)
# Context boost (PRD §12): relative boost of the scores of sections of the page / tab / focus
# documents, applied to each source before fusion like the trust weights (ADR 0006).
DEFAULT_CONTEXT_BOOST = 0.3
# Reranking (PRD §2–3, seed 001 §6; docs/adr/0015): the fused top-N a reranker reads (20: seed
# 001 §10 "only top-20 or top-50"; each one is a section text read and a passage scored), the
# characters of each passage it gets (bge-reranker-base reads 512 tokens of question + passage),
# how long the reranker may take once it started (PRD §3: retrieval + reranking < 300 ms, the
# retrieval budget being 150), and how much its ranking weighs against the fused one (reciprocal
# rank blend: 1 = the reranker's order alone, 0 = the fused order; docs/adr/0015). Reranking is
# off unless a reranker is configured (CascadeServices.reranker).
DEFAULT_RERANK_CANDIDATES = 20
MAX_RERANK_CANDIDATES = 100
DEFAULT_RERANK_PASSAGE_CHARS = 2000
DEFAULT_RERANK_TIMEOUT_MS = 150.0
DEFAULT_RERANK_WEIGHT = 1.0
# Query cache (PRD §30): entries kept per isolate.
DEFAULT_CACHE_ENTRIES = 1024
# Retrieval budget (PRD §21): sections a response may hold, and the router's own time.
DEFAULT_MAX_DOCUMENTS = 50
DEFAULT_MAX_LATENCY_MS = 150.0
DEFAULT_MAX_POSTINGS = 250_000
"""Postings one query may read (accumulated, or looked up to complete a candidate) before the
scorer stops and marks its ranking truncated: ~15 ms at ~55 ns a posting in CPython, about twice
that in Pyodide, and its partial scores' memory (≈ 50 bytes a section in a wasm heap)."""
DEFAULT_MAX_FETCHED_POSTINGS = 2_000_000
"""Postings of the lists one query may fetch (≈ 6 bytes each, 12–15 MB with the heads, what the
Worker's shard arena holds at most): its rarest terms first, the commonest left out past it
(``router.ranking.fetch_budget``). A bound on one request's cost, never reached by the 1M
benchmark's queries (the largest read 11.9 MB)."""
DEFAULT_MAX_WHOLE_LONG_POSTINGS = 65_536
"""Postings of long lists (those with a head page) one query may fetch whole (≈ 480 KiB with
their heads); past it, the commonest are read as their head page of 32,768 largest impacts
(``router.ranking.fetch_budget``, docs/adr/0029): it keeps a query of common words at a million
sections under 1 MB."""

# Bounds on what one question may make the stages do (issue 12, item 4: a hostile question of
# 2,000 characters must cost under 50 ms of CPU on the sample; bench/worst_request.py). Each is
# above what the golden set's questions need (measured: no golden result changes), and a stage
# that reaches one says so in its trace (``truncated``); docs/security.md lists them all.
DEFAULT_MAX_QUERY_WORDS = 32
"""Words of a question the analyzer stems, stopwords included (``Analyzer.bounded_terms``); the
rest is left out. The golden set's longest has 14; past 32 go 1 of SciFact's 1,109 questions, 2
of FaQuAD's 900, 4 of PIRA's 452 and 8 of Cranfield's 225 (CISI's paragraph-long queries, 76 of
112, are read to their 32nd word). Cold Snowball stemming costs ~70 µs a word in CPython, and
every later stage (term reads, BM25, keyword phrases, typo repair) grows with the terms."""
DEFAULT_MAX_REPAIRED_WORDS = 4
"""Unknown terms (and, apart, unknown surface words) of one question whose one-edit spellings
the typo repair generates, in question order: a misspelled question has one to three (the
golden set's most, 2). With ``min_coverage`` it also decides which questions are not repaired at
all: those whose known terms plus these 2 × 4 corrections would still cover under
``min_coverage`` of the question (``support.expansion.repair_reach``: over 16 distinct terms,
mostly unknown — 60 random or misspelt words, issue 31), which would abstain whatever the
repair found; no golden or helpdesk-pt question is one."""
DEFAULT_MAX_TYPO_PROBES = 2_500
"""Candidate spellings of one question checked against the partitions' Bloom filters (~3 µs
each in CPython, a Worker's about twice that; a 10-letter word has ~550): the golden set's
costliest question checked 3,400 before stem-level corrections were tried first, ``calibrassão
de equipamneto`` needs ~1,900; at 2,500 no golden result changes (a few non-kept corrections of
out-of-domain questions are left out), and a repair costs at most ~8 ms."""
DEFAULT_MAX_EXPANSION_TERMS = 16
"""Synonym terms the corrective expansion may add to one question, in all."""
DEFAULT_MAX_KEYWORD_PHRASES = 20_000
"""Keyword phrases filed under a question's terms that the keyword stage examines."""
DEFAULT_MAX_GRAPH_EDGES = 5_000
"""Edges the graph expansion reads and walks for one question (a hub section at a million
sections has tens of thousands of backlinks); ``max_graph_nodes`` bounds what it keeps."""


@dataclass(frozen=True)
class RetrievalBudget:
    """Upper bounds of one query (PRD §21); a query that hits one returns what it has."""

    max_documents: int = DEFAULT_MAX_DOCUMENTS
    max_graph_nodes: int = DEFAULT_GRAPH_MAX_NODES
    max_vector_results: int = DEFAULT_VECTOR_TOP_K
    max_latency_ms: float = DEFAULT_MAX_LATENCY_MS
    max_postings: int = DEFAULT_MAX_POSTINGS
    max_fetched_postings: int = DEFAULT_MAX_FETCHED_POSTINGS
    max_whole_long_postings: int = DEFAULT_MAX_WHOLE_LONG_POSTINGS
    max_query_words: int = DEFAULT_MAX_QUERY_WORDS
    max_repaired_words: int = DEFAULT_MAX_REPAIRED_WORDS
    max_typo_probes: int = DEFAULT_MAX_TYPO_PROBES
    max_expansion_terms: int = DEFAULT_MAX_EXPANSION_TERMS
    max_keyword_phrases: int = DEFAULT_MAX_KEYWORD_PHRASES
    max_graph_edges: int = DEFAULT_MAX_GRAPH_EDGES

    def __post_init__(self) -> None:
        owner = "RetrievalBudget"
        check_count(owner, "max_query_words", self.max_query_words)
        for name in (
            "max_repaired_words",
            "max_typo_probes",
            "max_expansion_terms",
            "max_keyword_phrases",
            "max_graph_edges",
        ):
            check_count(owner, name, getattr(self, name), 0)
        check_count(owner, "max_postings", self.max_postings)
        check_count(owner, "max_fetched_postings", self.max_fetched_postings)
        check_count(owner, "max_whole_long_postings", self.max_whole_long_postings, 0)
        check_count(owner, "max_documents", self.max_documents)
        check_count(owner, "max_graph_nodes", self.max_graph_nodes, 0)
        check_count(owner, "max_vector_results", self.max_vector_results)
        check_range(owner, "max_latency_ms", self.max_latency_ms, above=0)


@dataclass(frozen=True)
class RouterConfig:
    """Knobs of the query path; defaults are the tuned values."""

    top_k: int = DEFAULT_TOP_K
    bm25_candidates: int = DEFAULT_BM25_CANDIDATES
    field_weights: Mapping[str, float] = field(default_factory=lambda: DEFAULT_FIELD_WEIGHTS)
    high_confidence: float = DEFAULT_HIGH_CONFIDENCE
    medium_confidence: float = DEFAULT_MEDIUM_CONFIDENCE
    confidence_model: ConfidenceModel = DEFAULT_CONFIDENCE_MODEL
    abstain_below: float = DEFAULT_ABSTAIN_BELOW
    min_coverage: float = DEFAULT_MIN_COVERAGE
    min_specific_coverage: float = DEFAULT_MIN_SPECIFIC_COVERAGE
    synonym_weight: float = DEFAULT_SYNONYM_WEIGHT
    answer_sentences: int = DEFAULT_ANSWER_SENTENCES
    answer_sections: int = DEFAULT_ANSWER_SECTIONS
    answer_document_sections: int = DEFAULT_ANSWER_DOCUMENT_SECTIONS
    graph_seeds: int = DEFAULT_GRAPH_SEEDS
    graph_depth: int = DEFAULT_GRAPH_DEPTH
    vector_top_k: int = DEFAULT_VECTOR_TOP_K
    vector_rescue_probability: float = DEFAULT_VECTOR_RESCUE_PROBABILITY
    vector_evidence_probability: float = DEFAULT_VECTOR_EVIDENCE_PROBABILITY
    vector_evidence_models: Mapping[str, VectorEvidenceModel] = field(
        default_factory=lambda: VECTOR_EVIDENCE_MODELS
    )  # by embedding model id; a model not listed gets router.calibration.CONSERVATIVE_EVIDENCE
    vector_fallback: bool = True  # False: lexical only; see also ``always_vector``
    always_vector: bool = False  # True: every query reaches the vector stage (for comparison)
    fusion: FusionMethod = "rrf"
    rrf_k: int = DEFAULT_RRF_K
    source_weights: Mapping[str, float] = field(default_factory=lambda: DEFAULT_SOURCE_WEIGHTS)
    vector_weight_by_level: Mapping[str, float] = field(
        default_factory=lambda: DEFAULT_VECTOR_WEIGHT_BY_LEVEL
    )
    top_k_by_level: Mapping[str, int] = field(default_factory=lambda: DEFAULT_TOP_K_BY_LEVEL)
    trust_weights: Mapping[str, float] = field(default_factory=lambda: DEFAULT_TRUST_WEIGHTS)
    context_boost: float = DEFAULT_CONTEXT_BOOST
    corrective_expansion: bool = True
    budget: RetrievalBudget = field(default_factory=RetrievalBudget)
    rerank_candidates: int = DEFAULT_RERANK_CANDIDATES
    rerank_passage_chars: int = DEFAULT_RERANK_PASSAGE_CHARS
    rerank_timeout_ms: float = DEFAULT_RERANK_TIMEOUT_MS
    rerank_weight: float = DEFAULT_RERANK_WEIGHT
    always_rerank: bool = False  # True: rerank at HIGH confidence too (for comparison)

    def __post_init__(self) -> None:
        self._check_sizes()
        self._check_thresholds()
        self._check_weights()
        self._check_rerank()
        if not isinstance(self.budget, RetrievalBudget):
            raise ConfigError(f"RouterConfig.budget must be a RetrievalBudget, not {self.budget!r}")

    def _check_sizes(self) -> None:
        owner = "RouterConfig"
        for name in ("top_k", "bm25_candidates", "answer_sentences", "answer_sections", "rrf_k"):
            check_count(owner, name, getattr(self, name))
        check_count(owner, "vector_top_k", self.vector_top_k)
        check_count(owner, "answer_document_sections", self.answer_document_sections)
        check_count(owner, "graph_seeds", self.graph_seeds, 0)
        check_count(owner, "graph_depth", self.graph_depth, 0)
        check_keys(owner, "top_k_by_level", self.top_k_by_level, LEVELS)
        for level, k in self.top_k_by_level.items():
            check_count(owner, f"top_k_by_level[{level!r}]", k)

    def _check_thresholds(self) -> None:
        owner = "RouterConfig"
        for name in (
            "high_confidence",
            "medium_confidence",
            "abstain_below",
            "min_coverage",
            "min_specific_coverage",
            "synonym_weight",
        ):
            check_range(owner, name, getattr(self, name), 0.0, 1.0)
        check_order(
            owner,
            ("high_confidence", "medium_confidence", "abstain_below"),
            (self.high_confidence, self.medium_confidence, self.abstain_below),
        )
        check_range(owner, "vector_rescue_probability", self.vector_rescue_probability, 0.0, 1.0)
        if not isinstance(self.confidence_model, ConfidenceModel):
            raise ConfigError(f"{owner}.confidence_model must be a ConfidenceModel")

    def _check_weights(self) -> None:
        owner = "RouterConfig"
        check_choice(owner, "fusion", self.fusion, FUSION_METHODS)
        check_weights(owner, "field_weights", self.field_weights, (*FIELD_NAMES, BM25F_BLOCK))
        check_weights(owner, "source_weights", self.source_weights, SOURCE_NAMES)
        check_weights(owner, "vector_weight_by_level", self.vector_weight_by_level, LEVELS)
        check_weights(owner, "trust_weights", self.trust_weights, TRUST_LEVELS)
        check_range(owner, "context_boost", self.context_boost, 0.0)

    def _check_rerank(self) -> None:
        owner = "RouterConfig"
        check_count(owner, "rerank_candidates", self.rerank_candidates, 2)
        check_range(owner, "rerank_candidates", self.rerank_candidates, high=MAX_RERANK_CANDIDATES)
        check_count(owner, "rerank_passage_chars", self.rerank_passage_chars)
        check_range(owner, "rerank_timeout_ms", self.rerank_timeout_ms, above=0)
        check_range(owner, "rerank_weight", self.rerank_weight, 0.0, 1.0)
