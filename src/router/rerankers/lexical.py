"""The offline local reranker: cross-field lexical evidence that BM25F does not weigh.

Why these features: BM25F scores each query term alone, wherever it falls in a section. A
reranker that reads the question and the passage together can see what a bag of words cannot:
the question's words *in its order* (its adjacent pairs found adjacent: phrases) and *in the
title or heading* (the passage's first line, ``title › heading``), and which of its words are
rare *among these candidates* (a word every candidate holds decides nothing here, however rare
it is in the corpus). The passages arrive in fused order, best first
(``router.stages.rerank``), and that order is kept as a prior: the features move a candidate
only as far as their evidence carries it. The weights were tuned on SciFact *train* and the
golden set (docs/adr/0015); a proximity feature (the shortest span holding every matched term)
added nothing over the phrases there and was left out.

Why its own light tokenizer (case and accent folding, the stopwords of both languages, words cut
to their first ``STEM_CHARS`` letters): it must work on any package, Portuguese or English, and
in the Worker, with no analyzer handed through the port. Pure Python, no I/O; ~1 ms for 20
passages. What it is worth, measured: bench/README.md, "Reranking".
"""

from __future__ import annotations

import itertools
import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from router.analysis.stopwords import STOPWORDS
from router.analysis.text import fold

__all__ = ["LEXICAL_MODEL", "STEM_CHARS", "LexicalReranker", "LexicalWeights", "terms"]

LEXICAL_MODEL = "local-lexical"
STEM_CHARS = 6
"""Letters a word is cut to: a language-neutral stemmer (``validades`` → ``valida``)."""
_WORD = re.compile(r"\w+")
_MARKS = re.compile(r"[\u0300-\u036f]+")  # the combining diacritics of Latin letters
_STOP = frozenset(fold(w) for words in STOPWORDS.values() for w in words)


def _fold(text: str) -> str:
    """``analysis.text.fold`` for Latin text, by one regex instead of a test per character
    (20 SciFact abstracts: 15 ms → 2 ms)."""
    return _MARKS.sub("", unicodedata.normalize("NFD", text.casefold()))


def terms(text: str) -> list[str]:
    """Folded, stopword-free words cut to ``STEM_CHARS`` letters, in text order."""
    return [w[:STEM_CHARS] for w in _WORD.findall(_fold(text)) if w not in _STOP]


@dataclass(frozen=True)
class LexicalWeights:
    """How much each feature adds to a passage's score (each feature is in 0..1)."""

    coverage: float = 1.0  # weighted share of the question's terms the passage holds
    head: float = 0.5  # the same, in its first line (title › heading)
    phrase: float = 1.0  # share of the question's adjacent term pairs found adjacent
    prior: float = 1.0  # the fused order: prior × k / (k + position)
    prior_k: int = 10


class LexicalReranker:
    """Scores passages by :class:`LexicalWeights` over the question's terms."""

    def __init__(self, weights: LexicalWeights | None = None) -> None:
        self.weights = weights or LexicalWeights()
        self.model = LEXICAL_MODEL

    async def rerank(self, question: str, passages: Sequence[str]) -> list[float]:
        return self.scores(question, passages)

    def scores(self, question: str, passages: Sequence[str]) -> list[float]:
        """The synchronous work of :meth:`rerank`."""
        asked = list(dict.fromkeys(terms(question)))
        tokens = [terms(p) for p in passages]
        heads = [set(terms(p.split("\n", 1)[0])) if "\n" in p else set() for p in passages]
        weight = _rarity(asked, tokens)
        total = sum(weight.values()) or 1.0
        pairs = list(itertools.pairwise(asked))
        w = self.weights
        scores = []
        for position, (words, head) in enumerate(zip(tokens, heads, strict=True)):
            held = set(words)
            coverage = sum(weight[t] for t in asked if t in held) / total
            in_head = sum(weight[t] for t in asked if t in head) / total
            phrase = _phrases(pairs, words) if pairs else 0.0
            prior = w.prior_k / (w.prior_k + position)
            score = w.coverage * coverage + w.head * in_head + w.phrase * phrase + w.prior * prior
            scores.append(round(score, 6))
        return scores


def _rarity(asked: Sequence[str], tokens: Sequence[Sequence[str]]) -> dict[str, float]:
    """An idf over the candidates: of twenty, a term all of them hold weighs ~0.7, a term one
    holds ~2.7."""
    held = [set(words) for words in tokens]
    count = len(tokens)
    return {t: math.log(1.0 + (count + 1) / (sum(t in h for h in held) + 0.5)) for t in asked}


def _phrases(pairs: Sequence[tuple[str, str]], words: Sequence[str]) -> float:
    """Share of the question's adjacent term pairs that stand adjacent in the passage."""
    adjacent = set(itertools.pairwise(words))
    return sum(pair in adjacent for pair in pairs) / len(pairs)
