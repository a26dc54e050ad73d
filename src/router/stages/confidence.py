"""Stage — confidence of the lexical result and its level (PRD §20, seed 003).

Why these signals: raw BM25 scores are not comparable across queries; *coverage* (share of the
query's terms found in the best section, any field) and *strength* (its score over the best score
those terms could reach anywhere, field weights applied) are. *Margin* (how far the best section is
ahead of the second) separates a clear winner from a tie. A query whose words the knowledge never
uses gets coverage 0 and the router abstains instead of returning the least bad passage.
The three become one probability that the top result is relevant (``stages.calibration``), so
the levels and the abstention threshold are probabilities too.

Coverage counts words, so "qual o prazo da empresa para o aprendiz?" covers two thirds of
itself wherever "prazo" and "empresa" meet. *Specific coverage* weighs each term by its idf in
the caller's view (``ranking.bm25.specificity``): when the best section holds little of it and
the question names a term no section in view holds, its concept is missing and the router
declines, whatever the word count or a vector match (docs/adr/0023).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from router.calibration import LexicalSignals, evidence_model_for
from router.config import RouterConfig
from router.contract import Level
from router.package.format.postings import Postings
from router.package.view import PackageView
from router.ranking.bm25 import bm25_method, max_impact, query_lists, rarest_idf, specificity
from router.results import Assessment, LexicalConfidence
from router.support.question_frame import ClosedClasses, verb_stems

if TYPE_CHECKING:
    from router.package.stores.shards import Loaded
    from router.state import QueryState

__all__ = [
    "AGREEMENT_DEPTH",
    "CLARIFY_REASON",
    "CONTEXT_CONFIDENCE",
    "EXACT_CONFIDENCE",
    "agrees_with_lexical",
    "assess",
    "confidence_level",
    "lexical_confidence",
    "unreadable",
    "with_vector_evidence",
]

UNREADABLE_REASON = "the knowledge store could not be read for this question; try again"
CLARIFY_REASON = (
    "the question refers to the screen (this field, tab or page) but no page, tab or focus "
    "was given: ask which one"
)

# An exact id in the question is certain; a target named only by the UI context nearly so.
EXACT_CONFIDENCE = 1.0
CONTEXT_CONFIDENCE = 0.9
AGREEMENT_DEPTH = 3
"""Lexical results whose documents a vector match may agree with (``with_vector_evidence``)."""


def lexical_confidence(
    package: PackageView,
    terms: Sequence[str],
    ranked: Sequence[tuple[int, float]],
    weights: Mapping[str, float],
    config: RouterConfig,
    loaded: Loaded | None = None,
) -> LexicalConfidence:
    """Coverage, strength and margin (each 0..1, the lists read from the query's ``loaded``
    shards), the coverage weighed by specificity and the most specific term the top section
    lacks, and from them P(the top result is relevant) (``config.confidence_model``)."""
    distinct = list(dict.fromkeys(terms))
    unknown = [t for t in distinct if not package.knows(t)]
    if not distinct or not ranked:
        return LexicalConfidence(0.0, 0.0, 0.0, 0.0, [], unknown)
    best, score = ranked[0]
    method = bm25_method(package)
    matched = [t for t in distinct if _best_holds(package, t, best, weights, method, loaded)]
    ideal = _ideal_score(package, terms, weights, method, loaded)
    second = ranked[1][1] if len(ranked) > 1 else 0.0
    specific_coverage, missing = _specific_signals(package, distinct, matched)
    signals = LexicalSignals(
        coverage=len(matched) / len(distinct),
        strength=min(1.0, score / ideal) if ideal > 0 else 0.0,
        margin=1.0 - second / score if score > 0 else 0.0,
        specific_coverage=specific_coverage,
    )
    value = config.confidence_model.probability(signals)
    return LexicalConfidence(
        signals.coverage,
        signals.strength,
        signals.margin,
        value,
        matched,
        unknown,
        specific_coverage,
        missing,
    )


def _specific_signals(
    package: PackageView, distinct: Sequence[str], matched: Sequence[str]
) -> tuple[float, float]:
    """The share of the question's specificity the top section holds, and the specificity of
    the most specific term it lacks over the rarest term's (``ranking.bm25.specificity``: idf
    in the caller's view, so "estagiário" outweighs "empresa"), over its ``_concepts``. A
    question with no concept falls back to the plain coverage."""
    concepts = _concepts(package, distinct)
    held = set(matched)
    if not concepts:
        return len(held) / len(distinct), 0.0
    weights = specificity(package, concepts)
    total = sum(weights.values())
    lacking = [w for t, w in weights.items() if t not in held]
    held_share = sum(w for t, w in weights.items() if t in held) / total
    return held_share, min(1.0, max(lacking, default=0.0) / rarest_idf(package))


def _concepts(package: PackageView, distinct: Sequence[str]) -> list[str]:
    """The question's terms that name something, without three kinds of term the view does not
    know that count for neither side: a value the caller supplies (a term with a digit: an order
    number, an amount, a date, "pedido 48213", "R$ 500"), a compound's own spelling, which
    the analyzer adds beside its parts ("leuko-reduced" and "leuko", "reduc"; "nr-22", "nr22"
    and "nr", "22"): its parts carry the concept, and one of them unknown is missing; and the
    question's modal verbs and quantity words ("posso", "quantas": ``MODAL_WORDS``)."""
    compounds = {t for t in distinct if "-" in t}
    spellings = compounds | {t.replace("-", "") for t in compounds}
    modal = package.derive("question_frame", lambda v: ClosedClasses.of(v.analyzer)).modal
    return [
        t
        for t in distinct
        if package.knows(t) or not (any(c.isdigit() for c in t) or t in spellings or t in modal)
    ]


def confidence_level(value: float, config: RouterConfig) -> Level:
    """HIGH / MEDIUM / LOW from the configured thresholds (PRD §20 start values)."""
    if value >= config.high_confidence:
        return "HIGH"
    if value >= config.medium_confidence:
        return "MEDIUM"
    return "LOW"


def _ideal_score(
    package: PackageView,
    terms: Sequence[str],
    weights: Mapping[str, float],
    method: str,
    loaded: Loaded | None,
) -> float:
    """The score of a section holding every query term at its best impact: per term and block,
    the largest weighted impact of any partition in view (a section is in one partition only)."""
    ideal = 0.0
    for term, count in Counter(terms).items():
        for name, weight in weights.items():
            lists = query_lists(package, [term], {name: weight}, method, loaded)
            bounds = (w * max_impact(p, t, package.impact_bounds) for p, t, w in lists)
            ideal += count * max(bounds, default=0.0)
    return ideal


def _best_holds(
    package: PackageView,
    term: str,
    best: int,
    weights: Mapping[str, float],
    method: str,
    loaded: Loaded | None,
) -> bool:
    """Whether the top section holds ``term`` in any weighted block."""
    lists = query_lists(package, [term], weights, method, loaded)
    return any(_contains(p, term_id, best) for p, term_id, _ in lists)


def _contains(postings: Postings, term_id: int, section: int) -> bool:
    start, end = postings.indptr[term_id], postings.indptr[term_id + 1]
    at = bisect_left(postings.section_ids, section, start, end)
    return at < end and postings.section_ids[at] == section


def assess(state: QueryState) -> Assessment:
    """Exact hits are HIGH; a question that names only the screen, asked without the UI
    context, is declined with a request to clarify; otherwise the lexical confidence decides
    the level and abstention."""
    exact, config = state.exact, state.config
    if not exact and _needs_missing_context(state):
        state.trace.stage("confidence", clarify=True, reason=CLARIFY_REASON)
        return Assessment(0.0, "LOW", abstain=True, reason=CLARIFY_REASON, clarify=True)
    confidence = state.lexical_result().confidence
    if any(h.source == "exact" for h in exact):
        value = EXACT_CONFIDENCE
    elif exact:
        value = CONTEXT_CONFIDENCE
    else:
        value = confidence.value
    level: Level = "HIGH" if exact else confidence_level(value, config)
    lacks_concept = not exact and _lacks_its_concept(state, confidence)
    abstain = not exact and (
        not state.lexical_result().bm25
        or confidence.value < config.abstain_below
        or confidence.coverage < config.min_coverage
        or lacks_concept
    )
    state.trace.stage(
        "confidence",
        coverage=round(confidence.coverage, 3),
        strength=round(confidence.strength, 3),
        margin=round(confidence.margin, 3),
        specific_coverage=round(confidence.specific_coverage, 3),
        missing=round(confidence.missing, 3),
        value=round(value, 3),
        level=level,
        lexical_abstain=abstain,
        unknown_terms=confidence.unknown_terms,
    )
    return Assessment(value, level, abstain, _concept_reason(state) if lacks_concept else None)


def _concept_reason(state: QueryState) -> str:
    """The words of the question no document in view uses, for the decline message."""
    unknown = set(_unknown_concepts(state))
    analyzer = state.package.analyzer
    words = [w for w in state.features.words if analyzer.word_stem(w) in unknown]
    named = ", ".join(f'"{w}"' for w in dict.fromkeys(words)) or "its most specific terms"
    return (
        f"the question asks about {named}, which no document of this knowledge base mentions; "
        "the best match shares only its common words"
    )


def _lacks_its_concept(state: QueryState, confidence: LexicalConfidence) -> bool:
    """Whether the best section matched some of the question's words but too little of its
    specificity, and what it lacks includes a concept the knowledge in view does not know at
    all (a term no section holds, the typo repair already tried): the common words matched
    ("empresa", "prazo"), the concept ("estagiário") is nowhere. No section can supply it, so
    no vector match may lift the abstention either: it would be the nearest document. A term
    the view knows but the best section lacks is left to the calibrated probability (another
    section, or a vector match, may hold it); a question nothing of which matched is left to
    the vector evidence (ADR 0022: a paraphrase in words the knowledge never uses).

    A name the view does not know (``_proper_names``) is missing whatever the specificity.

    Not for an action request ("pause o anúncio da camiseta azul"): beyond the action and its
    object it names the action's arguments (an item, a person, a day), which the knowledge is
    not expected to hold."""
    if state.features.potential_action or not confidence.matched_terms:
        return False
    unknown = _unknown_concepts(state)
    if set(unknown) & _proper_names(state):
        return True  # a name the knowledge in view never mentions: "a Brigada *Alfa*"
    return bool(unknown) and confidence.specific_coverage < state.config.min_specific_coverage


def _proper_names(state: QueryState) -> set[str]:
    """Stems of the question's capitalised words past its first ("qual é o ramal da Brigada
    Alfa?"): a name. When the view knows no section holding it, the question is about
    something this knowledge — or this caller's part of it — does not have, however much of the
    rest matches (another tenant's brigade, a product of another company)."""
    words = state.query.text.split()[1:]
    named = [w.strip("?!.,;:()\"'") for w in words]
    named = [w for w in named if w[:1].isupper() and not w.isupper()]
    return set(state.package.analyzer.terms(" ".join(named))) if named else set()


def _unknown_concepts(state: QueryState) -> list[str]:
    """The question's concepts (``_concepts``) no section in view holds, but its verbs in the
    infinitive or gerund: "quantas fotos posso *colocar*?" — a help center that writes
    "adicionar" lacks the verb, not the thing asked about (``verb_stems``)."""
    lexical = state.lexical_result()
    concepts = set(_concepts(state.package, list(dict.fromkeys(lexical.terms))))
    verbs = verb_stems(state.package.analyzer, state.features.words)
    return [t for t in lexical.confidence.unknown_terms if t in concepts and t not in verbs]


def _needs_missing_context(state: QueryState) -> bool:
    request = state.request
    given = request.page or request.tab or request.focus
    return state.features.needs_ui_context and not given


def with_vector_evidence(state: QueryState) -> Assessment:
    """The confidence verdict once the vector stage ran, and which outcome it serves.

    A lexical abstention is lifted when P(the best vector match is relevant) — the package's
    embedding model's fitted ``VectorEvidenceModel`` over the match's margin above the
    question's background similarity, its lead over the second match and the lexical result's
    agreement — reaches ``vector_rescue_probability``; the answer is then LOW, at least at
    ``abstain_below`` — unless the question names a concept the knowledge does not know
    (``_lacks_its_concept``): no section holds it, so a close match is only the nearest
    document. An abstention that stands keeps its candidates as evidence (LOW, declined) when
    the lexical result matched some of the question or that probability reaches
    ``vector_evidence_probability``; otherwise it returns nothing (NONE)."""
    assessment, vector, config = state.verdict(), state.vector, state.config
    if not assessment.abstain or assessment.clarify:
        return assessment
    liftable = not _lacks_its_concept(state, state.lexical_result().confidence)
    probability = _vector_probability(state, liftable) if vector else 0.0
    if liftable and probability >= config.vector_rescue_probability:
        return replace(
            assessment,
            level="LOW",
            value=max(assessment.value, config.abstain_below),
            abstain=False,
        )
    lexical = state.lexical_result()
    matched = bool(lexical.bm25) and lexical.confidence.coverage > 0
    evidence = matched or probability >= config.vector_evidence_probability
    return replace(assessment, evidence=evidence)


def _vector_probability(state: QueryState, liftable: bool) -> float:
    """P(the best vector match is relevant), traced as ``vector_evidence`` (with
    ``concept_missing`` when the abstention may not be lifted whatever it is)."""
    model = evidence_model_for(state.package.embedding_model, state.config.vector_evidence_models)
    vector = state.vector
    agrees = agrees_with_lexical(state, vector[0][0])
    probability = model.probability([score for _, score in vector], agrees)
    blocked = {} if liftable else {"concept_missing": True}
    state.trace.stage(
        "vector_evidence",
        probability=round(probability, 3),
        lifted=liftable and probability >= state.config.vector_rescue_probability,
        model=model.fitted_on,
        **blocked,
    )
    return probability


def agrees_with_lexical(state: QueryState, section: int) -> bool:
    """Whether the best vector match is in a document of the lexical result's best three."""
    lexical = state.lexical_result().bm25[:AGREEMENT_DEPTH]
    section_doc = state.package.section_doc
    return section_doc[section] in {section_doc[s] for s, _ in lexical}


def unreadable(assessment: Assessment) -> Assessment:
    """The cascade abstains when the records of its results could not be read."""
    return replace(assessment, abstain=True, evidence=False, reason=UNREADABLE_REASON)
