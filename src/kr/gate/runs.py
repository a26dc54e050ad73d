"""Gate runs: the candidate and the active package evaluated on the same sets, then compared.

Why recompile the extra sets: a BEIR collection or a help-center set (``kr.help_center``) is
not part of the knowledge, but it tests what a package's *build configuration* (analyzer, BM25
parameters, field weights, embedder) does on another domain. Each extra set is compiled once
with the candidate's configuration and once with the active one's; when both are identical the
set cannot have changed and is skipped. A help-center set is then asked as the golden set is
(fact values, abstention, tenants, dates), with the same tolerances.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kr.answering import evaluate_golden
from kr.beir_eval import (
    DEFAULT_SPLIT,
    BeirRun,
    build_config_from_manifest,
    compile_collection,
    detect_language,
    evaluate_collection,
    load_collection,
    plan_vectors,
)
from kr.evaluation import EvalReport
from kr.gate.compare import DEFAULT_TOLERANCES, SetComparison, Tolerance, compare_reports
from kr.gate.report import DEFAULT_LISTED_QUERIES, GateReport
from kr.golden import DEFAULT_GOLDEN, GOLDEN_NAME, load_golden
from kr.help_center import HelpCenter, is_help_center
from kr.progress import progress_bar, say
from router.adapters.local.embedders import embedder_by_name
from router.package.reader import KnowledgePackage

__all__ = ["SKIPPED_NOTE", "GateSettings", "run_gate"]

SKIPPED_NOTE = "same build configuration as the active version: cannot have changed (skipped)"


@dataclass(frozen=True)
class GateSettings:
    """What the gate runs: sets, tolerances, the day the queries are asked on."""

    tolerances: Mapping[str, Tolerance] = field(default_factory=lambda: DEFAULT_TOLERANCES)
    golden: Path | None = DEFAULT_GOLDEN
    extra: tuple[Path, ...] = ()
    split: str = DEFAULT_SPLIT
    today: str | None = None
    listed_queries: int = DEFAULT_LISTED_QUERIES


async def run_gate(
    candidate: KnowledgePackage, active: KnowledgePackage, settings: GateSettings
) -> GateReport:
    """Evaluate both packages on the golden set and the extra sets, then compare."""
    report = GateReport(candidate.version, active.version, listed=settings.listed_queries)
    if settings.golden is not None:
        before, after = await _golden_reports(candidate, active, settings)
        report.sets.append(compare_reports(GOLDEN_NAME, before, after, settings.tolerances))
    for folder in settings.extra:
        if is_help_center(folder):
            comparison = await _help_center_comparison(folder, candidate, active, settings)
        else:
            comparison = await _extra_comparison(folder, candidate, active, settings)
        report.sets.append(comparison)
    return report


async def _golden_reports(
    candidate: KnowledgePackage, active: KnowledgePackage, settings: GateSettings
) -> tuple[EvalReport, EvalReport]:
    assert settings.golden is not None
    queries = load_golden(settings.golden)
    reports = []
    for package in (active, candidate):
        label = f"{GOLDEN_NAME} · {package.version}"
        reports.append(
            await evaluate_golden(
                queries, package, name=GOLDEN_NAME, today=settings.today, label=label
            )
        )
    return reports[0], reports[1]


def _embedder_choice(package: KnowledgePackage) -> str:
    from router.adapters.local.embedders import embedder_name_for_model

    return embedder_name_for_model((package.manifest.embedding or {}).get("model"))


def _same_build(
    candidate: KnowledgePackage, active: KnowledgePackage, language: str | None
) -> bool:
    """Whether an extra set compiles the same with both versions' build configurations."""
    new, old = (build_config_from_manifest(p.manifest, language) for p in (candidate, active))
    return new == old and _embedder_choice(candidate) == _embedder_choice(active)


async def _help_center_comparison(
    folder: Path, candidate: KnowledgePackage, active: KnowledgePackage, settings: GateSettings
) -> SetComparison:
    """A help-center set compiled with each version's build configuration and embedder (its
    analyzer language included, as ``kr build`` compiles knowledge), asked as the golden set
    is."""
    center = HelpCenter.load(folder)
    if _same_build(candidate, active, None):
        return SetComparison(center.name, [], [], 0, len(center.queries), SKIPPED_NOTE)
    reports = []
    for label, package in (("active", active), ("candidate", candidate)):
        say(f"{center.name}: compiling {len(center.corpus.documents)} documents ({label})")
        embeddings = center.embed(embedder_by_name(_embedder_choice(package)))
        config = build_config_from_manifest(package.manifest)
        compiled, _ = center.compile(config, embeddings)
        reports.append(
            await evaluate_golden(
                center.queries,
                compiled,
                name=center.name,
                today=settings.today,
                label=f"{center.name} · {label}",
            )
        )
    return compare_reports(center.name, reports[0], reports[1], settings.tolerances)


async def _extra_comparison(
    folder: Path, candidate: KnowledgePackage, active: KnowledgePackage, settings: GateSettings
) -> SetComparison:
    collection = load_collection(folder, settings.split)
    language = detect_language(collection)
    new_config = build_config_from_manifest(candidate.manifest, language)
    old_config = build_config_from_manifest(active.manifest, language)
    if _same_build(candidate, active, language):
        return SetComparison(collection.name, [], [], 0, len(collection.qrels), SKIPPED_NOTE)
    plan = plan_vectors(collection, _embedder_choice(candidate))
    if plan.note:
        say(f"{collection.name}: {plan.note}")
    reports = []
    for label, config in (("active", old_config), ("candidate", new_config)):
        say(f"{collection.name}: compiling {len(collection.documents):,} documents ({label})")
        package, _ = compile_collection(collection, config, plan.encoder)
        run = BeirRun(collection, package, plan.encoder)
        with progress_bar(len(collection.qrels), f"{collection.name} · {label}") as advance:
            reports.append(await evaluate_collection(run, progress=advance))
    return compare_reports(collection.name, reports[0], reports[1], settings.tolerances)
