"""Stage — confidence: the level and the abstention a lexical result earns, an exact or UI
context hit, a question that needs the screen, and the vector evidence that can lift a refusal."""

from __future__ import annotations

import pytest

from router.calibration import VectorEvidenceModel
from router.config import RouterConfig
from router.package.reader import KnowledgePackage
from router.results import Assessment
from router.stages.confidence import (
    CLARIFY_REASON,
    CONTEXT_CONFIDENCE,
    EXACT_CONFIDENCE,
    assess,
    confidence_level,
    lexical_confidence,
    unreadable,
    with_vector_evidence,
)
from router.state import QueryState
from tests.stages.state import query_state, searched_state

COVERED = "inventário de riscos"  # every term in the best section, a clear winner
HALF_COVERED = "treinamento de emergência"  # only "emergência" in the best section
OUT_OF_SCOPE = "receita de bolo de cenoura"
MISSING_CONCEPT = "validade do treinamento do estagiário"  # common words known, "estagiário" not


def test_a_covered_question_is_high_and_answered(package: KnowledgePackage) -> None:
    state = searched_state(package, COVERED)
    confidence = state.lexical_result().confidence
    assert confidence.coverage == 1.0 and confidence.unknown_terms == []
    verdict = assess(state)
    assert verdict.level == "HIGH" and not verdict.abstain
    assert verdict.value == confidence.value >= state.config.high_confidence
    traced = state.trace.stages["confidence"]
    assert traced["level"] == "HIGH" and traced["lexical_abstain"] is False


def test_an_out_of_scope_question_abstains_with_its_unknown_words(
    package: KnowledgePackage,
) -> None:
    state = searched_state(package, OUT_OF_SCOPE)
    verdict = assess(state)
    assert verdict.abstain and verdict.level == "LOW" and verdict.value == 0.0
    assert (verdict.reported_level, verdict.reported_value) == ("NONE", 0.0)
    assert not verdict.clarify and verdict.reason is None  # the coverage is the reason
    traced = state.trace.stages["confidence"]
    assert traced["coverage"] == 0.0 and traced["lexical_abstain"] is True
    assert traced["unknown_terms"] == state.features.terms


def test_half_a_question_covered_is_medium_and_abstains_under_a_stricter_coverage(
    package: KnowledgePackage,
) -> None:
    state = searched_state(package, HALF_COVERED)
    confidence = state.lexical_result().confidence
    assert confidence.coverage == 0.5 and len(confidence.matched_terms) == 1
    assert assess(state) == Assessment(confidence.value, "MEDIUM", abstain=False)
    strict = searched_state(package, HALF_COVERED, config=RouterConfig(min_coverage=0.6))
    verdict = assess(strict)
    assert verdict.abstain and verdict.level == "MEDIUM"  # served by default, refused here


def test_an_exact_id_is_certain_and_a_ui_context_hit_nearly_so(package: KnowledgePackage) -> None:
    exact = searched_state(package, "workPermit.validity")
    assert exact.lexical_result().confidence.value < EXACT_CONFIDENCE
    assert assess(exact) == Assessment(EXACT_CONFIDENCE, "HIGH", abstain=False)
    screen = searched_state(package, "explique isso", page="profile")
    assert [hit.source for hit in screen.exact] == ["context"]
    assert screen.lexical_result().bm25 == []  # nothing ranked: the page alone answers
    assert assess(screen) == Assessment(CONTEXT_CONFIDENCE, "HIGH", abstain=False)


def test_a_question_about_the_screen_without_its_context_asks_to_clarify(
    package: KnowledgePackage,
) -> None:
    alone = searched_state(package, "Explique este campo")
    verdict = assess(alone)
    assert verdict == Assessment(0.0, "LOW", abstain=True, reason=CLARIFY_REASON, clarify=True)
    assert alone.trace.stages["confidence"]["clarify"] is True
    with_page = searched_state(package, "Explique este campo", page="certificates")
    assert not assess(with_page).clarify and not assess(with_page).abstain


@pytest.mark.parametrize(
    ("value", "level"),
    [(1.0, "HIGH"), (0.5, "HIGH"), (0.4999, "MEDIUM"), (0.25, "MEDIUM"), (0.2499, "LOW")],
)
def test_levels_follow_the_configured_thresholds(value: float, level: str) -> None:
    assert confidence_level(value, RouterConfig()) == level


def test_stricter_thresholds_lower_the_level() -> None:
    stricter = RouterConfig(high_confidence=0.9, medium_confidence=0.6, abstain_below=0.2)
    assert confidence_level(0.85, stricter) == "MEDIUM"
    assert confidence_level(0.55, stricter) == "LOW"


def test_nothing_ranked_or_no_terms_is_zero_confidence(package: KnowledgePackage) -> None:
    state = query_state(package, OUT_OF_SCOPE)
    config, weights = state.config, state.block_weights
    nothing = lexical_confidence(state.package, state.features.terms, [], weights, config)
    assert (nothing.coverage, nothing.strength, nothing.margin, nothing.value) == (0, 0, 0, 0)
    assert nothing.unknown_terms == state.features.terms and nothing.matched_terms == []
    no_terms = lexical_confidence(state.package, [], [(0, 1.0)], weights, config)
    assert no_terms.value == 0.0


def test_a_repeated_word_counts_once_in_the_coverage(package: KnowledgePackage) -> None:
    once = searched_state(package, HALF_COVERED).lexical_result().confidence
    twice = searched_state(package, "treinamento de emergência emergência")
    assert twice.features.terms.count("emergent") == 2
    assert twice.lexical_result().confidence.coverage == once.coverage == 0.5


# --- vector evidence and unreadable records ------------------------------------------------------


def _with_vector(
    package: KnowledgePackage, query: str, vector: list[tuple[int, float]], config: RouterConfig
) -> QueryState:
    """``query`` searched and assessed, with ``vector`` as the vector stage's matches."""
    state = searched_state(package, query, config=config)
    state.assessment = assess(state)
    state.vector = vector
    return state


TRUSTING = VectorEvidenceModel(bias=-3.0, weights=(1.0, 1.0, 1.0), fitted_on="test")
"""A model that trusts a match standing 0.1 above its background (two units of 0.05)."""


def _standing_out(top: int, cosine: float, others: range) -> list[tuple[int, float]]:
    """A best match at ``cosine``, then twenty matches at 0.5 (the question's background)."""
    return [(top, cosine), *[(s, 0.5) for s in others][:20]]


def test_a_match_the_model_trusts_lifts_an_abstention_to_low(
    vpackage: KnowledgePackage,
) -> None:
    config = RouterConfig(vector_evidence_models={vpackage.manifest.embedding["model"]: TRUSTING})
    state = _with_vector(vpackage, OUT_OF_SCOPE, _standing_out(7, 0.95, range(20, 60)), config)
    assert state.verdict().abstain
    lifted = with_vector_evidence(state)
    assert lifted == Assessment(config.abstain_below, "LOW", abstain=False)
    assert lifted.reported_level == "LOW" and lifted.outcome == "answer"
    assert state.trace.stages["vector_evidence"]["lifted"] is True


def test_no_match_lifts_an_abstention_for_a_concept_the_knowledge_does_not_know(
    vpackage: KnowledgePackage,
) -> None:
    """ "validade do treinamento do estagiário": the knowledge knows training and validity, not
    interns. No section holds the concept, so no vector match, however close, can supply it: the
    candidates come back as evidence, never as an answer (issue 30)."""
    config = RouterConfig(vector_evidence_models={vpackage.manifest.embedding["model"]: TRUSTING})
    state = _with_vector(vpackage, MISSING_CONCEPT, _standing_out(7, 0.95, range(20, 60)), config)
    confidence = state.lexical_result().confidence
    assert confidence.unknown_terms == ["estagiari"] and confidence.coverage >= 0.5
    assert confidence.specific_coverage < config.min_specific_coverage
    assert state.verdict().abstain
    kept = with_vector_evidence(state)
    assert kept.abstain and kept.outcome == "evidence"
    assert state.trace.stages["vector_evidence"]["lifted"] is False


def test_a_match_in_the_background_keeps_the_abstention(vpackage: KnowledgePackage) -> None:
    """A high cosine alone is no evidence: every match sits at it (e5's 0.82–0.87 band)."""
    config = RouterConfig(vector_evidence_models={vpackage.manifest.embedding["model"]: TRUSTING})
    flat = [(s, 0.87) for s in range(7, 40)]
    state = _with_vector(vpackage, OUT_OF_SCOPE, flat, config)
    kept = with_vector_evidence(state)
    assert kept.abstain and kept.outcome in ("evidence", "nothing")
    assert state.trace.stages["vector_evidence"]["lifted"] is False


def test_an_abstention_with_lexical_matches_keeps_them_as_evidence(
    package: KnowledgePackage,
) -> None:
    state = _with_vector(package, HALF_COVERED, [], RouterConfig(min_coverage=0.9))
    verdict = with_vector_evidence(state)
    assert verdict.abstain and verdict.evidence
    assert (verdict.outcome, verdict.reported_level, verdict.reported_value) == (
        "evidence",
        "LOW",
        0.0,
    )


def test_an_abstention_with_nothing_matched_returns_nothing(package: KnowledgePackage) -> None:
    state = _with_vector(package, "xyzzy plugh frobnicate", [], RouterConfig())
    assert not state.lexical_result().bm25
    verdict = with_vector_evidence(state)
    assert (verdict.outcome, verdict.reported_level) == ("nothing", "NONE")


def test_vector_evidence_never_changes_an_answer_or_a_request_to_clarify(
    vpackage: KnowledgePackage,
) -> None:
    config = RouterConfig(vector_evidence_models={vpackage.manifest.embedding["model"]: TRUSTING})
    state = _with_vector(vpackage, COVERED, _standing_out(3, 0.99, range(20, 60)), config)
    served = state.verdict()
    assert not served.abstain and with_vector_evidence(state) is served
    clarify = Assessment(0.0, "LOW", abstain=True, reason=CLARIFY_REASON, clarify=True)
    state.assessment = clarify
    assert with_vector_evidence(state) is clarify


def test_a_lifted_answer_keeps_a_lexical_value_above_the_floor(
    vpackage: KnowledgePackage,
) -> None:
    config = RouterConfig(
        min_coverage=0.9,  # refused by its coverage, not its value
        vector_evidence_models={vpackage.manifest.embedding["model"]: TRUSTING},
    )
    state = _with_vector(vpackage, HALF_COVERED, _standing_out(1, 0.95, range(20, 60)), config)
    refused = state.verdict()
    assert refused.abstain and refused.value > config.abstain_below
    assert with_vector_evidence(state).value == refused.value


def test_unreadable_records_abstain_with_their_reason() -> None:
    verdict = unreadable(Assessment(0.9, "HIGH", abstain=False))
    assert verdict.abstain and verdict.reason and "could not be read" in verdict.reason
    assert (verdict.reported_level, verdict.reported_value) == ("NONE", 0.0)
