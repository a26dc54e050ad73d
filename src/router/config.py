"""Typed runtime configuration with named defaults.

Why one place: every threshold that changes a ranking or an abstention is a named, documented
default here, tuned only on training data (the golden set, SciFact train).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_TOP_K", "RouterConfig"]

DEFAULT_TOP_K = 5
# Candidate pool the BM25 stage keeps before filters and answer selection.
DEFAULT_BM25_CANDIDATES = 50
# Confidence (0..1) at or above which a lexical result is HIGH / MEDIUM (PRD §20 start values).
DEFAULT_HIGH_CONFIDENCE = 0.85
DEFAULT_MEDIUM_CONFIDENCE = 0.60
# Below this confidence, or when the best section holds under this share of the question's
# terms, the router abstains instead of returning the "least bad" passage (tuned on the golden set).
DEFAULT_ABSTAIN_BELOW = 0.34
DEFAULT_MIN_COVERAGE = 0.5
# Sentences quoted in an extractive answer, and how many sections they may come from.
DEFAULT_ANSWER_SENTENCES = 3
DEFAULT_ANSWER_SECTIONS = 2


@dataclass(frozen=True)
class RouterConfig:
    """Knobs of the query path; defaults are the tuned values."""

    top_k: int = DEFAULT_TOP_K
    bm25_candidates: int = DEFAULT_BM25_CANDIDATES
    high_confidence: float = DEFAULT_HIGH_CONFIDENCE
    medium_confidence: float = DEFAULT_MEDIUM_CONFIDENCE
    abstain_below: float = DEFAULT_ABSTAIN_BELOW
    min_coverage: float = DEFAULT_MIN_COVERAGE
    answer_sentences: int = DEFAULT_ANSWER_SENTENCES
    answer_sections: int = DEFAULT_ANSWER_SECTIONS
