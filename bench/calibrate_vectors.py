"""Fit the vector evidence model of an embedding model: P(the best vector match is relevant).

For every judged question of each knowledge base (knowledge folder + golden set), the cascade
runs with the vector stage forced (``always_vector``) and records the features of
``router.calibration.evidence_features`` — the best match's margin over the question's
background similarity, its lead over the second match, the lexical result's agreement — and
whether that match is relevant (an out-of-scope question's never is). A logistic regression
(Newton/IRLS, small L2) is fitted on each domain alone and validated on the others (precision
and recall of what it would lift at each threshold, overall and among the lexical abstentions,
the only questions a lift changes), then on all of them: those weights go into
``router.calibration.VECTOR_EVIDENCE_MODELS`` under the model id, or into
``RouterConfig.vector_evidence_models`` for a model of your own. Writes
``reports/vector-evidence.json``.

    .venv/bin/python bench/calibrate_vectors.py            # the sample + helpdesk-pt, e5 (~3 min)
    .venv/bin/python bench/calibrate_vectors.py --set mine path/to/knowledge path/to/golden.jsonl
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import router.pipeline as pipeline
from kr.answering import eval_config, package_answerer
from kr.golden import load_golden
from router.adapters.local.embedders import embedder_by_name
from router.calibration import evidence_features
from router.compile.build import build_knowledge
from router.config import RouterConfig
from router.package.reader import KnowledgePackage, load_package
from router.results import Ranked
from router.stages.confidence import agrees_with_lexical
from router.state import QueryState
from router.sync import run_sync

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
DEFAULT_SETS = [
    ("golden", ROOT / "knowledge", ROOT / "eval" / "golden.jsonl", "2026-06-15"),
    ("helpdesk-pt", DATA / "helpdesk-pt" / "knowledge", DATA / "helpdesk-pt" / "golden.jsonl", ""),
]
THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)
L2 = 1e-2


@dataclass
class Sample:
    domain: str
    query_id: str
    features: tuple[float, float, float]
    relevant: bool
    lexical_abstain: bool


def compile_set(knowledge: Path, embedder: str) -> KnowledgePackage:
    built = build_knowledge(knowledge, encoder=embedder_by_name(embedder))
    files = built.package.files()
    return load_package(files["manifest.json"], files.__getitem__)


def samples(domain: str, package: KnowledgePackage, judged: Path, today: str) -> list[Sample]:
    """One sample per judged question that reached the vector stage with a match."""
    seen: dict[str, tuple[tuple[float, float, float], bool]] = {}
    served = pipeline.vector_fallback

    async def recorded(state: QueryState, embedder: Any, index: Any) -> Ranked:
        found = await served(state, embedder, index)
        if found:
            agrees = agrees_with_lexical(state, found[0][0])
            features = evidence_features([v for _, v in found], agrees)
            seen[state.request.query] = (features, state.verdict().abstain)
        return found

    pipeline.vector_fallback = recorded  # type: ignore[assignment]
    try:
        config = eval_config(RouterConfig(always_vector=True, vector_rescue_probability=1.0))
        answer = package_answerer(package, config, today=today or None, cache=False)
        found = []
        for golden in load_golden(judged):
            seen.clear()
            response = run_sync(answer(golden.request))
            if golden.request.query not in seen:
                continue
            features, abstained = seen[golden.request.query]
            vector = response.trace.get("stages", {}).get("vector", {}).get("matches", [])
            top = vector[0][0] if vector else None
            expected = set(golden.expected)
            relevant = (
                not golden.abstain
                and top is not None
                and (top in expected or str(top).split("#")[0] in expected)
            )
            found.append(Sample(domain, golden.id, features, relevant, abstained))
        return found
    finally:
        pipeline.vector_fallback = served  # type: ignore[assignment]


def fit(rows: list[Sample]) -> np.ndarray:
    x = np.array([[1.0, *r.features] for r in rows])
    y = np.array([float(r.relevant) for r in rows])
    w = np.zeros(x.shape[1])
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-x @ w))
        hessian = x.T @ (x * (p * (1 - p))[:, None]) + L2 * np.eye(len(w))
        w -= np.linalg.solve(hessian, x.T @ (p - y) + L2 * w)
    return w


def lifted(w: np.ndarray, rows: list[Sample], threshold: float) -> dict[str, Any]:
    x = np.array([[1.0, *r.features] for r in rows])
    p = 1.0 / (1.0 + np.exp(-x @ w))
    y = np.array([r.relevant for r in rows])
    abstained = np.array([r.lexical_abstain for r in rows])
    chosen = p >= threshold
    rescued = chosen & abstained
    return {
        "threshold": threshold,
        "lifted": int(chosen.sum()),
        "precision": round(float(y[chosen].mean()), 3) if chosen.any() else None,
        "recall": round(float((y & chosen).sum() / max(1, y.sum())), 3),
        "abstentions_lifted": int(rescued.sum()),
        "abstentions_lifted_relevant": int((y & rescued).sum()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedder", default="e5", help="the build's embedder (default e5)")
    parser.add_argument(
        "--set",
        nargs="+",
        action="append",
        metavar=("NAME KNOWLEDGE GOLDEN", "TODAY"),
        help="a domain: name, knowledge folder, golden set, optional day (repeatable)",
    )
    args = parser.parse_args()
    sets = [(s[0], Path(s[1]), Path(s[2]), s[3] if len(s) > 3 else "") for s in args.set or []]
    rows: list[Sample] = []
    for name, knowledge, golden, today in sets or DEFAULT_SETS:
        package = compile_set(knowledge, args.embedder)
        rows += samples(name, package, golden, today)
        print(f"{name}: {sum(r.domain == name for r in rows)} questions with a vector match")
    domains = sorted({r.domain for r in rows})
    report: dict[str, Any] = {"embedder": args.embedder, "held_out": {}}
    for held in domains:
        train = [r for r in rows if r.domain != held]
        test = [r for r in rows if r.domain == held]
        if not train:
            continue
        w = fit(train)
        report["held_out"][held] = [lifted(w, test, t) for t in THRESHOLDS]
        print(f"fitted without {held}: weights {np.round(w, 3).tolist()}")
        for row in report["held_out"][held]:
            print(f"  on {held}: {row}")
    w = fit(rows)
    report["weights"] = {"bias": round(float(w[0]), 3), "weights": np.round(w[1:], 3).tolist()}
    report["all"] = [lifted(w, rows, t) for t in THRESHOLDS]
    print("fitted on every domain:", report["weights"])
    out = ROOT / "reports" / "vector-evidence.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
