"""Fit the confidence model: P(top result relevant) from the lexical signals, by logistic
regression on SciFact *train*, the golden set and helpdesk-pt (never a test split), validate it
with each Portuguese domain held out, and draw its reliability curve.

For every judged question that no exact key resolves and whose best section holds at least
``min_coverage`` of its terms (below it the router declines whatever the probability), the
cascade (abstention off, lexical stages only, the latency budget lifted) gives the confidence
stage's signals; the label is whether its first result is relevant (a golden question that must
be declined is never relevant). The fit is a plain Newton/IRLS on the features of
``router.calibration.confidence_features`` with a small L2 penalty; the script prints the
weights to paste into ``DEFAULT_CONFIDENCE_MODEL``, the Brier score and the expected calibration
error (ECE) of the old product score, of the current default and of the model, on the fit data
and on the SciFact *test* split (held out); for each Portuguese domain, the figures of a fit on
the other domains and SciFact train (ECE, false-answer and false-abstention rates at
``abstain_below``); and the precision of each level at the configured thresholds.
``reports/calibration.png`` plots the reliability curves; ``reports/calibration.json`` keeps the
figures and the samples (ids and signals: the helpdesk-pt set is read from ``../shared/data`` at
run time, never copied here).

    .venv/bin/python bench/calibrate.py                # ~2 min on two cores
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
from router.calibration import (
    DEFAULT_CONFIDENCE_MODEL,
    FEATURE_NAMES,
    LexicalSignals,
    confidence_features,
)
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
DOMAINS: list[tuple[str, Path, Path, str | None]] = [
    ("golden", KNOWLEDGE, GOLDEN, TODAY),
    # read where it lies at run time (never copied into the repository)
    (
        "helpdesk-pt",
        DATA / "helpdesk-pt" / "knowledge",
        DATA / "helpdesk-pt" / "golden.jsonl",
        None,
    ),
]
"""The Portuguese domains: (name, knowledge folder, golden set, the day its questions are asked)."""
BINS = 10
L2 = 1e-3


@dataclasses.dataclass
class Sample:
    source: str
    query_id: str
    coverage: float
    strength: float
    margin: float
    specific_coverage: float
    missing: float
    product: float  # the old confidence value (coverage × strength × margin, weighted)
    relevant: bool
    should_abstain: bool = False  # a golden question that must be declined
    category: str = ""

    @property
    def signals(self) -> LexicalSignals:
        return LexicalSignals(self.coverage, self.strength, self.margin, self.specific_coverage)


def _signals(response: QueryResponse) -> dict[str, Any] | None:
    """The confidence stage's signals, None when an exact key resolved the question."""
    stages = response.trace.get("stages", {})
    if stages.get("exact", {}).get("hits"):
        return None
    confidence = stages.get("confidence")
    return confidence if confidence and "coverage" in confidence else None


async def _samples(
    source: str,
    package: KnowledgePackage,
    queries: Sequence[GoldenQuery],
    config: RouterConfig,
    today: str | None = None,
    min_coverage: float | None = None,
) -> list[Sample]:
    answer = package_answerer(package, config, use_vectors=False, cache=False, today=today)
    config_min_coverage = RouterConfig().min_coverage if min_coverage is None else min_coverage
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
                float(signals.get("specific_coverage", 0.0)),
                float(signals.get("missing", 0.0)),
                _product(float(signals["coverage"]), float(signals["strength"])),
                relevant,
                query.abstain,
                query.category,
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
    return dataclasses.replace(
        base, abstain_below=0.0, min_coverage=0.0, min_specific_coverage=0.0, budget=budget
    )


def _beir(name: str, split: str, config: RouterConfig) -> list[Sample]:
    collection = load_collection(DATA / name, split)
    build = BuildConfig(analyzer=AnalyzerConfig(language=detect_language(collection)))
    package, _ = compile_collection(collection, build)
    return asyncio.run(_samples(f"{name}:{split}", package, beir_queries(collection), config))


def _golden(
    config: RouterConfig,
    name: str = "golden",
    knowledge: Path = KNOWLEDGE,
    golden: Path = GOLDEN,
    today: str | None = TODAY,
    min_coverage: float | None = None,
) -> list[Sample]:
    files = build_knowledge(knowledge).package.files()
    package = load_package(files["manifest.json"], files.__getitem__)
    queries = load_golden(golden)
    return asyncio.run(_samples(name, package, queries, config, today, min_coverage))


def _matrix(samples: Sequence[Sample]) -> tuple[np.ndarray, np.ndarray]:
    x = np.array([confidence_features(s.signals) for s in samples])
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


def _abstention_rates(p: np.ndarray, samples: Sequence[Sample], below: float) -> dict[str, Any]:
    """At ``below`` (the abstention threshold): the share of answered questions whose top result
    is wrong, the share of questions with a right top result declined, and how many questions
    that must be declined are answered (P alone, the coverage rules aside)."""
    answered = p >= below
    relevant = np.array([s.relevant for s in samples])
    must = np.array([s.should_abstain for s in samples])
    return {
        "false_answer_rate": round(float((answered & ~relevant).sum() / max(1, answered.sum())), 3),
        "false_abstention_rate": round(
            float((~answered & relevant).sum() / max(1, relevant.sum())), 3
        ),
        "must_decline_answered": f"{int((answered & must).sum())}/{int(must.sum())}",
    }


def held_out(fit: Sequence[Sample], domains: Sequence[str], below: float) -> list[dict[str, Any]]:
    """Each Portuguese domain held out: fitted on the rest (SciFact train and the other
    domains), its ECE, Brier and abstention rates on the held-out domain."""
    rows = []
    for domain in domains:
        train = [s for s in fit if s.source != domain]
        test = [s for s in fit if s.source == domain]
        bias, weights = fit_logistic(*_matrix(train))
        p = _predict(bias, weights, test)
        figures = _figures(f"model, {domain} held out", p, _matrix(test)[1])
        rows.append({**figures, **_abstention_rates(p, test, below), "held_out": domain})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "calibration.json")
    parser.add_argument("--png", type=Path, default=ROOT / "reports" / "calibration.png")
    args = parser.parse_args()
    config = _ranking_config()
    started = time.perf_counter()
    domains = [name for name, *_ in DOMAINS]
    fit = _beir("scifact", "train", config) + [
        sample for domain in DOMAINS for sample in _golden(config, *domain)
    ]
    test = _beir("scifact", "test", config)
    seconds = time.perf_counter() - started
    print(f"{len(fit)} fit questions, {len(test)} held out ({seconds:.0f} s)")
    x, y = _matrix(fit)
    bias, weights = fit_logistic(x, y)
    rounded = tuple(round(float(w), 4) for w in weights)
    print(f"DEFAULT_CONFIDENCE_MODEL bias={bias:.4f} weights={rounded}")
    product = np.array([s.product for s in fit])
    _, y_test = _matrix(test)
    curves = [
        _figures("old product score, fit set", product, y),
        _figures("current default, fit set", _default_p(fit), y),
        _figures("model, fit set", _predict(bias, weights, fit), y),
        _figures("model, SciFact test (held out)", _predict(bias, weights, test), y_test),
    ]
    default = RouterConfig()
    high, medium, below = default.high_confidence, default.medium_confidence, default.abstain_below
    domain_rows = held_out(fit, domains, below)
    report = {
        "date": time.strftime("%Y-%m-%d"),
        "fit_on": ["scifact:train", *domains],
        "features": list(FEATURE_NAMES),
        "model": {"bias": bias, "weights": [float(w) for w in weights]},
        "current_default": dataclasses.asdict(DEFAULT_CONFIDENCE_MODEL),
        "curves": curves,
        "held_out_domains": domain_rows,
        "levels_fit": level_precision(_predict(bias, weights, fit), y, high, medium),
        "levels_held_out": level_precision(_predict(bias, weights, test), y_test, high, medium),
        "per_domain_all_fit": [
            {
                **_figures(f"model, {d}", _predict(bias, weights, s), _matrix(s)[1]),
                **_abstention_rates(_predict(bias, weights, s), s, below),
            }
            for d in domains
            for s in [[s for s in fit if s.source == d]]
        ],
        "samples": [dataclasses.asdict(s) for s in fit + test],
    }
    for curve in [*curves, *domain_rows, *report["per_domain_all_fit"]]:
        name, n, brier, ece = curve["name"], curve["n"], curve["brier"], curve["ece"]
        rates = {k: curve[k] for k in ("false_answer_rate", "false_abstention_rate") if k in curve}
        print(f"  {name:<34} n={n:>4} brier={brier:.4f} ece={ece:.4f} {rates}")
    print("  levels (fit):", report["levels_fit"])
    print("  levels (held out):", report["levels_held_out"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    _plot(curves, args.png)
    print(f"wrote {args.out} and {args.png}")


def _default_p(samples: Sequence[Sample]) -> np.ndarray:
    return np.array([DEFAULT_CONFIDENCE_MODEL.probability(s.signals) for s in samples])


if __name__ == "__main__":
    main()
