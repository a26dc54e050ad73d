"""The calibrated confidence: the probability that the top result is relevant.

Why a probability: the product coverage × strength × margin ranked questions well but its
values meant nothing by themselves ("HIGH" at 0.46, a LOW guess answered at 0.35). A logistic
model over the same lexical signals, fitted on judged questions (SciFact *train* and the
golden set only: never a test split; ``bench/calibrate.py`` refits it and draws the
reliability curve in ``reports/calibration.png``), turns them into P(top result relevant), so
the levels and the abstention threshold read as probabilities and a caller can act on them.
Pure arithmetic: it runs in the Worker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from router.errors import ConfigError

__all__ = ["DEFAULT_CONFIDENCE_MODEL", "ConfidenceModel", "confidence_features"]


def confidence_features(coverage: float, strength: float, margin: float) -> tuple[float, ...]:
    """The model's inputs, each in 0..1: the three lexical signals and the old product of
    coverage and strength (their interaction: a strong match of half the question is weak)."""
    return (coverage, strength, margin, coverage * strength)


@dataclass(frozen=True)
class ConfidenceModel:
    """``P = σ(bias + Σ wᵢ·xᵢ)`` over :func:`confidence_features`; ``fitted_on`` says where
    the weights come from."""

    bias: float
    weights: tuple[float, ...]
    fitted_on: str = ""

    def __post_init__(self) -> None:
        width = len(confidence_features(0.0, 0.0, 0.0))
        if len(self.weights) != width:
            raise ConfigError(
                f"ConfidenceModel needs {width} weights (coverage, strength, margin, "
                f"coverage×strength), got {len(self.weights)}"
            )
        if not all(math.isfinite(w) for w in (self.bias, *self.weights)):
            raise ConfigError("ConfidenceModel weights must be finite numbers")

    def probability(self, coverage: float, strength: float, margin: float) -> float:
        """P(the top result is relevant); 0 when nothing of the question matched."""
        if coverage <= 0.0:
            return 0.0
        features = confidence_features(coverage, strength, margin)
        logit = self.bias + sum(w * x for w, x in zip(self.weights, features, strict=True))
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, logit))))


# Fitted by bench/calibrate.py on 716 questions (SciFact train 657, golden 59) with coverage at
# least min_coverage; reports/calibration.json keeps the run, bench/README.md its figures.
DEFAULT_CONFIDENCE_MODEL = ConfidenceModel(
    bias=-2.824,
    weights=(1.5626, 0.8537, 4.9046, 2.051),
    fitted_on="scifact:train + golden, 2026-12-03",
)
