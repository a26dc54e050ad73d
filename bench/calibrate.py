"""Fit the confidence model: P(top result relevant) from the lexical signals, by logistic
regression on SciFact *train* and the golden set (never a test split), and draw its
reliability curve.

For every judged question that no exact key resolves and whose best section holds at least
``min_coverage`` of its terms (below it the router declines whatever the probability), the
cascade (abstention off, lexical stages only, the latency budget lifted) gives the confidence
stage's coverage, strength and margin; the label is whether its first result is relevant (a
golden question that must be declined is never relevant). The fit is a plain Newton/IRLS on
the four features of ``router.calibration.confidence_features`` with a small L2
penalty; the script prints the weights to paste into ``DEFAULT_CONFIDENCE_MODEL``, the Brier
score and the expected calibration error (ECE) of the old product score and of the model, on
the fit data and on the SciFact *test* split (held out), and the precision of each level at
the configured thresholds. ``reports/calibration.png`` plots the reliability curves;
``reports/calibration.json`` keeps the figures and the samples.

    .venv/bin/python bench/calibrate.py                # ~4 min on two cores
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kr.answering import package_answerer
from kr.beir_eval import beir_queries, compile_collection, detect_language, load_collection
from kr.golden import GoldenQuery, load_golden
from kr.outcomes import ranked_keys
from router.analysis.analyzer import AnalyzerConfig
from router.calibration import DEFAULT_CONFIDENCE_MODEL, confidence_features
from router.compile.build import build_knowledge
from router.compile.indexer import BuildConfig
from router.config import RouterConfig
from router.contract import QueryResponse
from router.package.reader import KnowledgePackage, load_package

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
GOLDEN = ROOT / "eval" / "golden.jsonl"
KNOWLEDGE = ROOT / "knowledge"
TODAY = "2026-06-15"  # the golden set's day (tests/common.py)
BINS = 10
L2 = 1e-3


@dataclasses.dataclass
class Sample:
    source: str
    query_id: str
    coverage: float
    strength: float
    margin: float
    product: float  # the old confidence value (coverage × strength × margin, weighted)
    relevant: bool


def _signals(response: QueryResponse) -> dict[str, Any] | None:
    """The confidence stage's signals, None when an exact key resolved the question."""
    stages = response.trace.get("stages", {})
    if stages.get("exact", {}).get("hits"):
        return None
    confidence = stages.get("confidence")
    return confidence if confidence and "coverage" in confidence else None


async def _samples(
    source: str, package: KnowledgePackage, queries: Sequence[GoldenQuery], config: RouterConfig
) -> list[Sample]:
    answer = package_answerer(package, config, use_vectors=False, cache=False, today=TODAY)
    config_min_coverage = RouterConfig().min_coverage
    samples = []
    for query in queries:
        response = await answer(query.request)
        signals = _signals(response)
        if signals is None or float(signals["coverage"]) < config_min_coverage:
            continue  # resolved exactly, or declined by the coverage rule whatever P says
        keys = ranked_keys(query, response)
        relevant = bool(keys) and not query.abstain and keys[0] in set(query.expected)
        samples.append(
            Sample(
                source,
                query.id,
                float(signals["coverage"]),
                float(signals["strength"]),
                float(signals["margin"]),
                _product(float(signals["coverage"]), float(signals["strength"])),
                relevant,
            )
        )
    return samples


def _product(coverage: float, strength: float) -> float:
    """The confidence before the model: coverage × (0.5 + 0.5 × strength) (margin unused)."""
    return coverage * (0.5 + 0.5 * strength)


def _ranking_config() -> RouterConfig:
    """Abstention off and no latency budget: every question gets its ranking and signals."""
    base = RouterConfig()
    budget = dataclasses.replace(base.budget, max_latency_ms=1e9)
    return dataclasses.replace(base, abstain_below=0.0, min_coverage=0.0, budget=budget)


def _beir(name: str, split: str, config: RouterConfig) -> list[Sample]:
    collection = load_collection(DATA / name, split)
    build = BuildConfig(analyzer=AnalyzerConfig(language=detect_language(collection)))
    package, _ = compile_collection(collection, build)
    return asyncio.run(_samples(f"{name}:{split}", package, beir_queries(collection), config))


def _golden(config: RouterConfig) -> list[Sample]:
    files = build_knowledge(KNOWLEDGE).package.files()
    package = load_package(files["manifest.json"], files.__getitem__)
    return asyncio.run(_samples("golden", package, load_golden(GOLDEN), config))


def _matrix(samples: Sequence[Sample]) -> tuple[np.ndarray, np.ndarray]:
    x = np.array([confidence_features(s.coverage, s.strength, s.margin) for s in samples])
    y = np.array([1.0 if s.relevant else 0.0 for s in samples])
    return x, y


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = L2) -> tuple[float, np.ndarray]:
    """Newton/IRLS with an L2 penalty (not on the bias); a handful of steps converge."""
    design = np.hstack([np.ones((len(x), 1)), x])
    beta = np.zeros(design.shape[1])
    penalty = np.eye(design.shape[1]) * l2 * len(x)
    penalty[0, 0] = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-design @ beta))
        gradient = design.T @ (y - p) - penalty @ beta
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + penalty
        step = np.linalg.solve(hessian, gradient)
        beta += step
        if np.abs(step).max() < 1e-8:
            break
    return float(beta[0]), beta[1:]


def _predict(bias: float, weights: np.ndarray, samples: Sequence[Sample]) -> np.ndarray:
    x, _ = _matrix(samples)
    p = 1.0 / (1.0 + np.exp(-(bias + x @ weights)))
    p[np.array([s.coverage <= 0 for s in samples])] = 0.0
    return p


def calibration_error(p: np.ndarray, y: np.ndarray) -> tuple[float, list[dict[str, float]]]:
    """ECE over ``BINS`` equal-width bins, and the bins (mean predicted, observed, count)."""
    bins = []
    ece = 0.0
    for lo in np.linspace(0, 1, BINS, endpoint=False):
        inside = (p >= lo) & (p < lo + 1 / BINS) if lo + 1 / BINS < 1 else (p >= lo)
        if not inside.any():
            continue
        predicted, observed = float(p[inside].mean()), float(y[inside].mean())
        ece += inside.sum() / len(p) * abs(predicted - observed)
        bins.append({"predicted": predicted, "observed": observed, "count": int(inside.sum())})
    return float(ece), bins


def _figures(name: str, p: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    ece, bins = calibration_error(p, y)
    return {
        "name": name,
        "n": len(y),
        "relevant_share": round(float(y.mean()), 4),
        "brier": round(float(((p - y) ** 2).mean()), 4),
        "ece": round(ece, 4),
        "bins": bins,
    }


def _share(labels: np.ndarray) -> float | None:
    return round(float(labels.mean()), 3) if len(labels) else None


def level_precision(p: np.ndarray, y: np.ndarray, high: float, medium: float) -> dict[str, Any]:
    """How often the top result is relevant at each level, and how many questions get it."""
    levels = {"HIGH": p >= high, "MEDIUM": (p >= medium) & (p < high), "LOW": p < medium}
    return {
        name: {
            "n": int(mask.sum()),
            "relevant": round(float(y[mask].mean()), 3) if mask.any() else None,
        }
        for name, mask in levels.items()
    }


def _plot(curves: Sequence[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 6))
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":", label="perfect calibration")
    for curve in curves:
        xs = [b["predicted"] for b in curve["bins"]]
        ys = [b["observed"] for b in curve["bins"]]
        ax.plot(xs, ys, marker="o", label=f"{curve['name']} (ECE {curve['ece']:.3f})")
    ax.set_xlabel("predicted P(top result relevant)")
    ax.set_ylabel("observed share relevant")
    ax.set_title("Confidence calibration (reliability curve)")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "calibration.json")
    parser.add_argument("--png", type=Path, default=ROOT / "reports" / "calibration.png")
    args = parser.parse_args()
    config = _ranking_config()
    started = time.perf_counter()
    fit = _beir("scifact", "train", config) + _golden(config)
    held_out = _beir("scifact", "test", config)
    seconds = time.perf_counter() - started
    print(f"{len(fit)} fit questions, {len(held_out)} held out ({seconds:.0f} s)")
    x, y = _matrix(fit)
    bias, weights = fit_logistic(x, y)
    rounded = tuple(round(float(w), 4) for w in weights)
    print(f"DEFAULT_CONFIDENCE_MODEL bias={bias:.4f} weights={rounded}")
    product = np.array([s.product for s in fit])
    _, y_test = _matrix(held_out)
    curves = [
        _figures("old product score, fit set", product, y),
        _figures("model, fit set", _predict(bias, weights, fit), y),
        _figures("model, SciFact test (held out)", _predict(bias, weights, held_out), y_test),
    ]
    default = RouterConfig()
    high, medium = default.high_confidence, default.medium_confidence
    golden = [s for s in fit if s.source == "golden"]
    report = {
        "date": time.strftime("%Y-%m-%d"),
        "fit_on": ["scifact:train", "golden"],
        "model": {"bias": bias, "weights": [float(w) for w in weights]},
        "current_default": dataclasses.asdict(DEFAULT_CONFIDENCE_MODEL),
        "curves": curves,
        "levels_fit": level_precision(_predict(bias, weights, fit), y, high, medium),
        "levels_held_out": level_precision(_predict(bias, weights, held_out), y_test, high, medium),
        "golden_only": _figures(
            "model, golden", _predict(bias, weights, golden), _matrix(golden)[1]
        ),
        "samples": [dataclasses.asdict(s) for s in fit + held_out],
    }
    for curve in [*curves, report["golden_only"]]:
        name, n, brier, ece = curve["name"], curve["n"], curve["brier"], curve["ece"]
        print(f"  {name:<34} n={n:>4} brier={brier:.4f} ece={ece:.4f}")
    print("  levels (fit):", report["levels_fit"])
    print("  levels (held out):", report["levels_held_out"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    _plot(curves, args.png)
    print(f"wrote {args.out} and {args.png}")


if __name__ == "__main__":
    main()
