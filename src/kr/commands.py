"""``kr eval``, ``kr gate``, ``kr rollback`` and the gated activation of ``kr build``.

Why a module apart from the CLI: the argument parser stays a thin table of options, and these
functions take plain values, so tests and other commands (``kr publish``) call them directly.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kr.answering import active_package, package_answerer, package_folder_files, stored_package
from kr.beir_eval import (
    DEFAULT_SPLIT,
    BeirRun,
    compile_collection,
    detect_language,
    evaluate_collection,
    load_collection,
    plan_vectors,
)
from kr.evaluation import EvalReport, evaluate, load_golden
from kr.gate import ActivationLog, GateDecision, GateSettings, gate_or_force, rollback
from kr.progress import progress_bar, say
from kr.report import DEFAULT_REPORTS_DIR, write_report
from router.adapters.local.state import LocalState, default_state_dir
from router.analysis.analyzer import AnalyzerConfig
from router.compile.indexer import BuildConfig
from router.errors import ConfigError, DatasetError
from router.package.fetch import fetch_package_files, is_version_id
from router.package.manifest import MANIFEST_NAME
from router.package.reader import KnowledgePackage
from router.ports import PublishJournal
from router.publisher import (
    PublishReport,
    PublishTarget,
    StepCallback,
    activate,
    publish,
    publish_package,
    read_package,
)
from router.service import package_key

__all__ = [
    "EvalRequest",
    "activate_gated",
    "eval_command",
    "gate_command",
    "gated_publish",
    "report_folder",
    "resolve_candidate",
    "rollback_command",
    "write_eval_report",
]


@dataclass(frozen=True)
class EvalRequest:
    """What ``kr eval`` was asked: a golden JSONL file or a BEIR folder, and how to run it."""

    target: Path
    state: Path | None = None  # state folder (default $KR_STATE or .kr-state), golden only
    package: Path | None = None  # a package folder instead of the active version (golden)
    split: str = DEFAULT_SPLIT
    embedder: str = "e5"  # BEIR folders: e5 | hash | none
    embed_missing: bool = False
    variant: str = "cascade"
    language: str | None = None
    today: str | None = None


def report_folder(request: EvalRequest, name: str) -> Path:
    """``reports/<set>``: golden, scifact, scifact-train, faquad-ir-bm25, …"""
    if request.target.is_dir():
        suffix = "" if request.split == DEFAULT_SPLIT else f"-{request.split}"
        suffix += "" if request.variant == "cascade" else f"-{request.variant}"
        return DEFAULT_REPORTS_DIR / f"{name}{suffix}"
    return DEFAULT_REPORTS_DIR / name


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
        package = read_package(package_folder_files(request.package))
    else:
        package = await active_package(LocalState(request.state or default_state_dir()))
    embedding = (package.manifest.embedding or {}).get("model")
    today = request.today or dt.date.today().isoformat()
    info: dict[str, Any] = {
        "set": str(target),
        "knowledge_version": package.version,
        "section_vectors": embedding or "none",
        "asked_on": today,
        "config": "RouterConfig defaults, latency budget lifted, fresh memory cache",
    }
    answer = package_answerer(package, today=today)
    name = "golden" if target.name == "golden.jsonl" else target.stem
    with progress_bar(len(queries), name) as advance:
        return await evaluate(queries, answer, name=name, info=info, progress=advance)


async def _eval_folder(request: EvalRequest) -> EvalReport:
    collection = load_collection(request.target, request.split)
    language = request.language or detect_language(collection)
    plan = plan_vectors(collection, request.embedder, embed_missing=request.embed_missing)
    if plan.note:
        say(plan.note)
    if request.variant in ("vector", "rrf") and plan.encoder is None:
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
    run = BeirRun(collection, package, plan.encoder, request.variant)
    with progress_bar(len(collection.qrels), collection.name) as advance:
        return await evaluate_collection(run, progress=advance, info=info)


def write_eval_report(report: EvalReport, request: EvalRequest, folder: Path | None) -> Path:
    return write_report(report, folder or report_folder(request, report.name))


async def resolve_candidate(
    spec: str, state: LocalState
) -> tuple[KnowledgePackage, Mapping[str, bytes] | None]:
    """A package folder (its files, to publish) or a version already in the local state."""
    path = Path(spec)
    if path.is_dir():
        files = package_folder_files(path)
        return read_package(files), files
    if not is_version_id(spec):
        raise ConfigError(f"{spec!r} is neither a package folder nor a knowledge version")
    manifest = await state.blobs.get(package_key(spec, MANIFEST_NAME))
    if manifest is None:
        raise ConfigError(f"{spec!r} is neither a package folder nor a version in {state.root}")
    return await stored_package(state, spec), None


async def activate_gated(
    files: Mapping[str, bytes],
    state: LocalState,
    *,
    force: bool,
    settings: GateSettings,
    command: str,
) -> tuple[str, GateDecision]:
    """Publish ``files`` to the local state, gate them against the active version, activate.

    The blobs are written (inactive) before the gate runs, so a blocked candidate stays
    available for ``kr gate VERSION --activate`` or ``kr publish VERSION`` after a fix of the
    tolerances, and the active version is untouched. Raises ``QualityGateError`` if blocked.
    """
    candidate = read_package(files)
    version = await publish_package(
        files, state.blobs, state.kv, state.relational, activate_now=False
    )
    decision = await gate_or_force(candidate, state.kv, state.blobs, force=force, settings=settings)
    if decision.report is not None:
        print(decision.report.render())
    if decision.reason != "already active":
        previous = await activate(state.kv, version)
        log = ActivationLog(state.root)
        log.record(command, version, previous, decision.reason, decision.forced)
        if decision.forced:
            print(
                f"FORCED activation of {version} (quality gate skipped; previous: "
                f"{previous or 'none'}), logged in {log.path}"
            )
    return version, decision


async def gated_publish(
    files: Mapping[str, bytes],
    target: PublishTarget,
    journal: PublishJournal,
    *,
    activate_now: bool,
    force: bool,
    settings: GateSettings,
    log: ActivationLog,
    on_step: StepCallback | None = None,
) -> PublishReport:
    """``kr publish`` with the gate: every step but the activation, then the gate against the
    *target's* active version (read through its KV and blob store), then the activation alone
    (the journal skips what is done). A blocked candidate raises ``QualityGateError`` with the
    version uploaded but inactive; re-running with ``--force`` activates it."""
    if not activate_now:
        return await publish(files, target, journal, activate_now=False, on_step=on_step)
    staged = await publish(files, target, journal, activate_now=False, on_step=on_step)
    decision = await gate_or_force(
        read_package(files), target.kv, target.blobs, force=force, settings=settings
    )
    if decision.report is not None:
        print(decision.report.render())
    staged_steps = set(staged.steps)

    def on_final_step(step: str, status: str) -> None:
        if on_step is not None and step not in staged_steps:  # already reported once
            on_step(step, status)

    report = await publish(files, target, journal, activate_now=True, on_step=on_final_step)
    report.ran = [*staged.ran, *report.ran]
    report.skipped = [s for s in staged.skipped if s not in report.ran]
    if report.activated:
        reason = f"{decision.reason} (target {target.name})"
        log.record("publish", report.version, report.previous_version, reason, decision.forced)
        if decision.forced:
            print(
                f"FORCED activation of {report.version} (quality gate skipped), "
                f"logged in {log.path}"
            )
    return report


async def gate_command(
    spec: str, state: LocalState, settings: GateSettings, *, activate_now: bool
) -> GateDecision:
    """Compare a candidate with the active version; with ``activate_now``, activate it if the
    gate passes. Raises ``QualityGateError`` when it does not."""
    candidate, files = await resolve_candidate(spec, state)
    if activate_now:
        if files is None:  # already in the state: publishing again is a no-op
            files = await _stored_files(state, candidate)
        _, decision = await activate_gated(
            files, state, force=False, settings=settings, command="gate"
        )
        return decision
    decision = await gate_or_force(candidate, state.kv, state.blobs, settings=settings)
    if decision.report is not None:
        print(decision.report.render())
    return decision


async def _stored_files(state: LocalState, package: KnowledgePackage) -> dict[str, bytes]:
    async def get(name: str) -> bytes | None:
        return await state.blobs.get(package_key(package.version, name))

    return await fetch_package_files(get, f"version {package.version} in {state.root}")


async def rollback_command(state: LocalState) -> tuple[str, str]:
    """Activate the previous version and log it; returns (now active, rolled back from)."""
    now, before = await rollback(state.kv, state.blobs)
    ActivationLog(state.root).record("rollback", now, before, "rollback", forced=False)
    return now, before
