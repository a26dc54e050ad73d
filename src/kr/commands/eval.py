"""``kr eval``: evaluate golden sets, help-center sets or BEIR folders, print the metrics (side by
side for several sets), write one report per set."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kr.answering import evaluate_golden
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
from kr.evaluation import EvalReport, side_by_side
from kr.golden import DEFAULT_GOLDEN, GOLDEN_NAME, load_golden
from kr.help_center import HelpCenter, extra_sets_from_env, is_help_center
from kr.local import DEFAULT_EMBEDDER, local_state
from kr.packages import active_package, read_package_folder
from kr.progress import progress_bar, say
from kr.report import DEFAULT_REPORTS_DIR, write_report
from kr.rerankers import DEFAULT_RERANKER, reranker_from_spec
from router.adapters.local.embedders import embedder_by_name
from router.analysis.analyzer import AnalyzerConfig
from router.compile.indexer import BuildConfig
from router.errors import ConfigError, DatasetError

__all__ = [
    "JSON_SECTIONS",
    "EvalRequest",
    "default_targets",
    "eval_command",
    "report_folder",
    "run",
]

JSON_SECTIONS = ("info", "overall", "per_category", "by_path", "operations")
"""What ``kr eval --json`` prints of the report (metrics.json has all of it)."""


@dataclass(frozen=True)
class EvalRequest:
    """What ``kr eval`` was asked of one set: a golden JSONL file, a help-center folder
    (``knowledge/`` + ``golden.jsonl``) or a BEIR folder, and how to run it."""

    target: Path
    state: Path | None = None  # state folder (default $KR_STATE or .kr-state), golden only
    package: Path | None = None  # a package folder instead of the active version (golden)
    split: str = DEFAULT_SPLIT
    embedder: str = DEFAULT_EMBEDDER  # folders (help-center, BEIR): e5 | hash | none
    embed_missing: bool = False
    variant: str = DEFAULT_VARIANT
    language: str | None = None
    today: str | None = None
    reranker: str = DEFAULT_RERANKER  # --reranker SPEC (kr.rerankers)


async def run(args: argparse.Namespace) -> int:
    targets = list(args.targets) or default_targets()
    reports: list[EvalReport] = []
    written: set[Path] = set()
    for target in targets:
        request = EvalRequest(
            target=target,
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
        reports.append(report)
        if not args.no_report:
            folder = _unused(_report_folder(args, request, report.name, len(targets)), written)
            written.add(folder)
            print(f"report written to {write_report(report, folder)}", file=sys.stderr)
    _print(args, reports)
    return 0


def default_targets() -> list[Path]:
    """``kr eval`` without a target: the golden set, then the sets of ``$KR_EXTRA_SETS``."""
    return [DEFAULT_GOLDEN, *extra_sets_from_env()]


def _report_folder(args: argparse.Namespace, request: EvalRequest, name: str, sets: int) -> Path:
    """``--report-dir`` itself for one set, ``--report-dir/<set>`` for several."""
    default = report_folder(request, name)
    if args.report_dir is None:
        return default
    return args.report_dir if sets == 1 else args.report_dir / default.name


def _unused(folder: Path, written: set[Path]) -> Path:
    """``folder``, or ``folder-2``… when a set of the same name was written in this run."""
    candidate, number = folder, 1
    while candidate in written:
        number += 1
        candidate = folder.with_name(f"{folder.name}-{number}")
    return candidate


def _print(args: argparse.Namespace, reports: list[EvalReport]) -> None:
    """One set: its per-category table; several: their headline metrics side by side."""
    if args.json:
        sections = [{k: r.to_json()[k] for k in JSON_SECTIONS} for r in reports]
        named = zip(_names(reports), sections, strict=True)
        payload: Any = sections[0] if len(reports) == 1 else dict(named)
        print(json.dumps(payload, ensure_ascii=False))
    elif len(reports) == 1:
        print(reports[0].table())
        print("operations:", json.dumps(reports[0].operations, ensure_ascii=False))
    else:
        print(side_by_side(reports))
    if args.failures:
        for report in reports:
            for failure in report.failures:
                row = failure if len(reports) == 1 else {"set": report.name, **failure}
                print(json.dumps(row, ensure_ascii=False))


def _names(reports: list[EvalReport]) -> list[str]:
    """The sets' names, made unique (``golden``, ``golden-2``) for the JSON keys."""
    names: list[str] = []
    for report in reports:
        name, number = report.name, 1
        while name in names:
            number += 1
            name = f"{report.name}-{number}"
        names.append(name)
    return names


def report_folder(request: EvalRequest, name: str) -> Path:
    """``reports/<set>``: golden, helpdesk-pt, scifact, scifact-train, faquad-ir-bm25, …"""
    if request.target.is_dir() and not is_help_center(request.target):
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
    """Evaluate the golden set (against the active version or a package folder), a help-center
    set or a BEIR folder (both compiled in memory)."""
    target = request.target
    if target.is_dir():
        if is_help_center(target):
            return await _eval_help_center(request)
        if not (target / "corpus.jsonl").is_file():
            raise DatasetError(
                f"{target} has no corpus.jsonl and no knowledge/ with golden.jsonl: neither a "
                "BEIR-layout collection nor a help-center set"
            )
        return await _eval_folder(request)
    if not target.is_file():
        raise DatasetError(
            f"{target} not found: pass a golden set (.jsonl), a help-center folder or a "
            "BEIR-layout folder"
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
    name = GOLDEN_NAME if target.name == DEFAULT_GOLDEN.name else target.stem
    return await evaluate_golden(
        queries, package, name=name, today=today, reranker=reranker, info=info
    )


async def _eval_help_center(request: EvalRequest) -> EvalReport:
    """Compile the set's knowledge in memory with ``kr build``'s configuration and ask its
    golden set of it (section vectors through the vector cache)."""
    center = HelpCenter.load(request.target)
    encoder = embedder_by_name(request.embedder)
    say(
        f"{center.name}: compiling {len(center.corpus.documents)} documents, "
        f"{len(center.queries)} golden queries"
    )
    package, facts = center.compile(BuildConfig(), center.embed(encoder))
    today = request.today or dt.date.today().isoformat()
    reranker = reranker_from_spec(request.reranker)
    info: dict[str, Any] = {
        "set": str(request.target),
        "knowledge_version": facts["knowledge_version"],
        "documents": facts["documents"],
        "section_vectors": encoder.model_id if encoder is not None else "none",
        "asked_on": today,
        "build": {"seconds": facts["build_s"], "sections": facts["sections"]},
        "config": "compiled in memory with kr build's configuration; RouterConfig defaults, "
        "latency budget lifted, fresh memory cache",
        "reranker": reranker.model if reranker is not None else "none",
    }
    return await evaluate_golden(
        center.queries, package, name=center.name, today=today, reranker=reranker, info=info
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
