"""What the stages find and the pipeline keeps on ``QueryState``: one leaf module of result types.

Why here and not beside the stage that makes each: ``QueryState`` types its fields with them and
the stages take ``QueryState``; a result type in its stage made the state import the stage and
the stage import the state back (an import circle for every stage whose result lives on the
state). This module imports no stage, no state and no pipeline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal, TypeVar

from router.contract import Complexity, ConfidenceLevel, Intent, Level, TaskType
from router.knowledge.model import Document
from router.package.format.doc_columns import day_number
from router.package.format.vocabulary import TermEntry
from router.package.view import ExactTarget, PackageView

__all__ = [
    "AnswerType",
    "Assessment",
    "ExactHit",
    "Fused",
    "GraphNode",
    "IndexReads",
    "LatencyTier",
    "Lexical",
    "LexicalConfidence",
    "Mask",
    "NormalizedQuery",
    "Outcome",
    "QueryFeatures",
    "Ranked",
    "Visibility",
    "VisibleMasks",
]

Ranked = list[tuple[int, float]]
"""(section index, score), best first: what every ranking stage returns."""

GraphNode = tuple[int, float, str]
"""(section index, score, relation it was reached through)."""

LatencyTier = Literal["fast", "normal", "quality"]
"""The latency tier a request asks for (``stages.tiers``)."""

AnswerType = Literal["person", "number", "list", "any"]
"""What a direct answer must be (``stages.query_analyzer``)."""

Outcome = Literal["answer", "evidence", "nothing"]
"""What a query serves: an answer, only evidence, or nothing (``Assessment.outcome``)."""

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class Fused:
    """One candidate section: its fused score and every source's own score (for the trace)."""

    section: int
    final: float = 0.0
    scores: Mapping[str, float] = field(default_factory=dict)

    def with_score(self, source: str, score: float) -> Fused:
        return Fused(self.section, self.final, {**self.scores, source: score})


@dataclass(frozen=True)
class Lexical:
    """What the lexical stages found for one list of query terms."""

    terms: list[str]
    keyword: Ranked
    bm25: Ranked
    confidence: LexicalConfidence


@dataclass(frozen=True)
class LexicalConfidence:
    """How well the lexical result covers the question (``stages.confidence``).

    ``specific_coverage`` is the share of the question's specificity (its terms' idf in the
    caller's view) the top section holds; ``missing`` the specificity of the most specific
    term it lacks, over that of a term the view does not know (0 when it lacks none)."""

    coverage: float
    strength: float
    margin: float
    value: float
    matched_terms: list[str]
    unknown_terms: list[str]
    specific_coverage: float = 0.0
    missing: float = 0.0


@dataclass(frozen=True)
class Assessment:
    """How sure the cascade is of its candidates, and which of three outcomes it serves.

    ``abstain`` starts as the lexical verdict (no BM25 result, or too weak, or too little of the
    question covered); a vector match the embedding model's evidence model trusts can still
    lift it (``with_vector_evidence``). An abstention with ``evidence`` withholds the answer
    but returns what it found for the agent (LOW, results flagged ``low_evidence``, PRD §22); one
    without returns nothing (NONE: nothing passed the evidence bar, seed 003).
    """

    value: float
    level: Level
    abstain: bool
    reason: str | None = None  # why it abstains, when the terms' coverage is not the cause
    clarify: bool = False  # abstains to ask for the UI context the question needs
    evidence: bool = False  # abstains, but returns its candidates as evidence (LOW)

    @property
    def reported_value(self) -> float:
        return 0.0 if self.abstain else self.value

    @property
    def reported_level(self) -> ConfidenceLevel:
        if not self.abstain:
            return self.level
        return "LOW" if self.evidence else "NONE"

    @property
    def outcome(self) -> Outcome:
        """answer (HIGH/MEDIUM/LOW answered), evidence (declined, candidates returned), or
        nothing (declined, nothing returned)."""
        if not self.abstain:
            return "answer"
        return "evidence" if self.evidence else "nothing"


@dataclass(frozen=True)
class ExactHit:
    """A resolved key: which target and through which key and source."""

    target: ExactTarget
    key: str
    source: Literal["exact", "context"]


class Mask(bytes):
    """One byte per item, 1 where it may be seen: ``item in mask`` is a C-level index, faster
    than a frozenset's lookup and a byte per item however many are hidden."""

    __slots__ = ()
    __contains__ = bytes.__getitem__  # type: ignore[assignment]


@dataclass(frozen=True)
class Visibility:
    """Who asks and when: the inputs of every filter."""

    tenant: str | None
    day: str  # ISO date the query is about
    include_deprecated: bool = False

    def admits(self, doc: Document) -> bool:
        if not doc.visible_to(self.tenant):
            return False
        if doc.deprecated and not self.include_deprecated:
            return False
        return doc.valid_on(self.day)

    @cached_property
    def day_number(self) -> int:
        return day_number(self.day)


@dataclass(frozen=True)
class VisibleMasks:
    """What one query may see: its view's documents, and its sections (None: all of them)."""

    documents: Mask
    sections: Mask | None  # None: every section is visible


@dataclass(frozen=True)
class QueryFeatures:
    """What the analyzer learned about the question."""

    terms: list[str]  # of its first ``max_query_words`` words (``truncated``: some were left out)
    intent: Intent
    potential_action: bool
    task_type: TaskType
    complexity: Complexity
    short_query: bool
    deictic: bool
    value_question: bool
    needs_ui_context: bool = False  # names only the screen ("explique este campo")
    answer_type: AnswerType = "any"  # what a direct answer must be: a person, a number, a list
    words: tuple[str, ...] = ()  # the plain words analysed, lower-cased (typo repair's input)
    truncated: bool = False


@dataclass(frozen=True)
class NormalizedQuery:
    """The question in one canonical form (``stages.normalizer``)."""

    original: str
    text: str  # NFC, single spaces, no surrounding punctuation
    folded: str  # casefolded, accents removed: the matching key


@dataclass(frozen=True)
class IndexReads:
    """What a stage read of the index for the stages after it: exact keys, term entries,
    document records, section texts. The stage returns it; the pipeline folds it into the
    query's view (``QueryState.package``) and texts, so no stage writes the state it reads."""

    exact: Mapping[str, list[ExactTarget]] | None = None
    terms: Mapping[str, tuple[TermEntry | None, ...]] = field(default_factory=dict)
    records: Mapping[int, Document] | None = None
    texts: Mapping[int, str] = field(default_factory=dict)

    def then(self, other: IndexReads) -> IndexReads:
        """These reads, then ``other``'s (a later entry for the same key wins)."""
        return IndexReads(
            _merged(self.exact, other.exact),
            {**self.terms, **other.terms},
            _merged(self.records, other.records),
            {**self.texts, **other.texts},
        )

    def applied_to(self, view: PackageView) -> PackageView:
        """``view`` with these reads readable through it."""
        if self.exact is not None:
            view = view.with_exact(self.exact)
        if self.terms:
            view = view.with_terms(self.terms)
        if self.records is not None:
            view = view.with_records(self.records)
        return view


def _merged(first: Mapping[K, V] | None, then: Mapping[K, V] | None) -> Mapping[K, V] | None:
    if first is None or then is None:
        return then if first is None else first
    return {**first, **then}
