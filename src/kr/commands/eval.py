"""``kr eval``: evaluate the golden set or a BEIR folder, print the metrics, write the report."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kr.answering import package_answerer
from kr.beir_eval import (
    DEFAULT_SPLIT,
    DEFAULT_VARIANT,
    VECTOR_VARIANTS,
    BeirRun,
    compile_collection,
    detect_language,
    evaluate_collection,
    load_collection,
    plan_vectors,
)
from kr.evaluation import EvalReport, evaluate
from kr.fact_values import fact_values_of
from kr.golden import DEFAULT_GOLDEN, GOLDEN_NAME, load_golden
from kr.local import DEFAULT_EMBEDDER, local_state
from kr.packages import active_package, read_package_folder
from kr.progress import progress_bar, say
from kr.report import DEFAULT_REPORTS_DIR, write_report
from kr.rerankers import DEFAULT_RERANKER, reranker_from_spec
from router.analysis.analyzer import AnalyzerConfig
from router.compile.indexer import BuildConfig
from router.errors import ConfigError, DatasetError

__all__ = ["JSON_SECTIONS", "EvalRequest", "eval_command", "report_folder", "run"]

JSON_SECTIONS = ("info", "overall", "per_category", "by_path", "operations")
"""What ``kr eval --json`` prints of the report (metrics.json has all of it)."""


@dataclass(frozen=True)
class EvalRequest:
    """What ``kr eval`` was asked: a golden JSONL file or a BEIR folder, and how to run it."""

    target: Path
    state: Path | None = None  # state folder (default $KR_STATE or .kr-state), golden only
    package: Path | None = None  # a package folder instead of the active version (golden)
    split: str = DEFAULT_SPLIT
    embedder: str = DEFAULT_EMBEDDER  # BEIR folders: e5 | hash | none
    embed_missing: bool = False
    variant: str = DEFAULT_VARIANT
    language: str | None = None
    today: str | None = None
    reranker: str = DEFAULT_RERANKER  # --reranker SPEC (kr.rerankers)


async def run(args: argparse.Namespace) -> int:
    request = EvalRequest(
        target=args.target,
        state=args.state,
        package=args.package,
        split=args.split,
        embedder=args.embedder,
        embed_missing=args.embed_missing,
        variant=args.variant,
        language=args.language,
        today=args.today,
        reranker=args.reranker,
    )
    report = await eval_command(request)
    if not args.no_report:
        written = write_report(report, args.report_dir or report_folder(request, report.name))
        print(f"report written to {written}", file=sys.stderr)
    if args.json:
        print(json.dumps({k: report.to_json()[k] for k in JSON_SECTIONS}, ensure_ascii=False))
    else:
        print(report.table())
        print("operations:", json.dumps(report.operations, ensure_ascii=False))
    if args.failures:
        for failure in report.failures:
            print(json.dumps(failure, ensure_ascii=False))
    return 0


def report_folder(request: EvalRequest, name: str) -> Path:
    """``reports/<set>``: golden, scifact, scifact-train, faquad-ir-bm25, …"""
    if request.target.is_dir():
        suffix = "" if request.split == DEFAULT_SPLIT else f"-{request.split}"
        suffix += "" if request.variant == DEFAULT_VARIANT else f"-{request.variant}"
        suffix += _reranker_suffix(request)
        return DEFAULT_REPORTS_DIR / f"{name}{suffix}"
    return DEFAULT_REPORTS_DIR / f"{name}{_reranker_suffix(request)}"


def _reranker_suffix(request: EvalRequest) -> str:
    """``-rerank-local``, ``-rerank-e5``, ``-rerank-http`` …; nothing without a reranker."""
    if request.reranker == DEFAULT_RERANKER:
        return ""
    return "-rerank-" + request.reranker.split(":", 1)[0]


async def eval_command(request: EvalRequest) -> EvalReport:
    """Evaluate the golden set (against the active version or a package folder) or a BEIR
    folder (compiled in memory)."""
    target = request.target
    if target.is_dir():
        return await _eval_folder(request)
    if not target.is_file():
        raise DatasetError(
            f"{target} not found: pass a golden set (.jsonl) or a BEIR-layout folder"
        )
    queries = load_golden(target)
    if request.package is not None:
        package = read_package_folder(request.package)
    else:
        package = await active_package(local_state(request.state))
    embedding = (package.manifest.embedding or {}).get("model")
    today = request.today or dt.date.today().isoformat()
    info: dict[str, Any] = {
        "set": str(target),
        "knowledge_version": package.version,
        "section_vectors": embedding or "none",
        "asked_on": today,
        "config": "RouterConfig defaults, latency budget lifted, fresh memory cache",
    }
    reranker = reranker_from_spec(request.reranker)
    info["reranker"] = reranker.model if reranker is not None else "none"
    answer = package_answerer(package, today=today, reranker=reranker)
    name = GOLDEN_NAME if target.name == DEFAULT_GOLDEN.name else target.stem
    catalog = await package.read_catalog()
    facts = fact_values_of(catalog.documents)
    with progress_bar(len(queries), name) as advance:
        return await evaluate(
            queries, answer, name=name, info=info, progress=advance, fact_values=facts, today=today
        )


async def _eval_folder(request: EvalRequest) -> EvalReport:
    collection = load_collection(request.target, request.split)
    language = request.language or detect_language(collection)
    plan = plan_vectors(collection, request.embedder, embed_missing=request.embed_missing)
    if plan.note:
        say(plan.note)
    if request.variant in VECTOR_VARIANTS and plan.encoder is None:
        raise ConfigError(
            f"the {request.variant} variant needs section vectors; pick --embedder e5 or hash "
            "(with the vectors cached, or --embed-missing)"
        )
    say(
        f"{collection.name}: compiling {len(collection.documents):,} documents ({language}), "
        f"{len(collection.qrels):,} judged {request.split} queries"
    )
    config = BuildConfig(analyzer=AnalyzerConfig(language=language))
    package, facts = compile_collection(collection, config, plan.encoder)
    info: dict[str, Any] = {
        "set": f"{request.target} (split {request.split})",
        "documents": facts["documents"],
        "language": language,
        "variant": request.variant,
        "section_vectors": plan.label,
        "build": {
            "seconds": facts["build_s"],
            "package_bytes": facts["package_bytes"],
            "postings": facts["postings"],
        },
        "config": "RouterConfig defaults, 100 results per query, latency budget lifted; "
        "ranking of abstained queries taken with abstention off",
    }
    if plan.note:
        info["vectors_note"] = plan.note
    if plan.encoder is not None:
        info["query_vectors"] = (
            "embedded in batches into the vector cache before the run: the vector stage's "
            "time is the index search (in the Worker the embedder is a Workers AI call)"
        )
    reranker = reranker_from_spec(request.reranker)
    info["reranker"] = reranker.model if reranker is not None else "none"
    run = BeirRun(collection, package, plan.encoder, request.variant, reranker=reranker)
    with progress_bar(len(collection.qrels), collection.name) as advance:
        return await evaluate_collection(run, progress=advance, info=info)
