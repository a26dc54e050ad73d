"""The regression gate: a candidate package goes live only if it is not worse than the active one.

Why compare with the active version rather than fixed floors: the golden set grows and the
cascade improves, so "not worse than what serves now" is the invariant that holds over time
(PRD §40–42: quality is measured on every index change, and a worse index never goes live).
Both packages answer the same queries with the same configuration, latency budget lifted (see
``kr.answering``), so the verdict depends on the packages alone.

Why recompile the extra collections: a BEIR collection is not part of the knowledge, but it
tests what a package's *build configuration* (analyzer, BM25 parameters, field weights) does to
ranking. Each extra set is compiled once with the candidate's configuration and once with the
active one's; when both are identical the set cannot have changed and is skipped.

Why a log of activations: a forced activation (``--force``) or a rollback changes what users get
without the gate's approval; ``activations.jsonl`` in the state folder keeps who did what, when.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from kr.answering import full_loader, package_answerer
from kr.beir_eval import (
    BeirRun,
    build_config_from_manifest,
    compile_collection,
    detect_language,
    evaluate_collection,
    load_collection,
    plan_vectors,
)
from kr.evaluation import EvalReport, QueryOutcome, evaluate, load_golden
from kr.progress import progress_bar, say
from router.errors import (
    BindingError,
    ConfigError,
    NoActiveVersionError,
    NoPreviousVersionError,
    PackageFormatError,
    QualityGateError,
)
from router.package.reader import KnowledgePackage
from router.ports import ACTIVE_VERSION_KEY, PREVIOUS_VERSION_KEY, BlobStore, KeyValueStore
from router.publisher import activate

__all__ = [
    "ACTIVATION_LOG",
    "DEFAULT_GOLDEN",
    "DEFAULT_LISTED_QUERIES",
    "DEFAULT_TOLERANCES",
    "GATE_BLOCKED_EXIT",
    "ActivationLog",
    "GateDecision",
    "GateReport",
    "GateSettings",
    "MetricCheck",
    "QueryChange",
    "SetComparison",
    "Tolerance",
    "gate_or_force",
    "parse_tolerances",
    "rollback",
    "run_gate",
]

GATE_BLOCKED_EXIT = 3
"""Exit status of a command the gate stopped (1 is any other error, 2 a knowledge format one)."""
DEFAULT_GOLDEN = Path("eval/golden.jsonl")
DEFAULT_LISTED_QUERIES = 20
ACTIVATION_LOG = "activations.jsonl"
_EPSILON = 1e-9  # float noise: a drop of exactly the tolerance passes


@dataclass(frozen=True)
class Tolerance:
    """How much a metric may get worse: ``max_drop`` for higher-is-better metrics, the largest
    allowed rise for ``lower_is_better`` ones (counts such as forbidden leaks)."""

    max_drop: float
    lower_is_better: bool = False

    def allows(self, before: float, after: float) -> bool:
        worse_by = after - before if self.lower_is_better else before - after
        return worse_by <= self.max_drop + _EPSILON


DEFAULT_TOLERANCES: Mapping[str, Tolerance] = MappingProxyType(
    {
        # one golden query of ~100 ranked is 0.01: a net loss of one top hit blocks
        "hit@1": Tolerance(0.01),
        "hit@3": Tolerance(0.01),
        "mrr": Tolerance(0.01),
        "ndcg@10": Tolerance(0.01),
        "recall@10": Tolerance(0.02),
        "recall@100": Tolerance(0.01),
        # declining out-of-scope questions is the safety property (seed 003): no loss at all
        "abstention_recall": Tolerance(0.0),
        "abstention_precision": Tolerance(0.05),
        "intent_acc": Tolerance(0.0),
        "forbidden_leaks": Tolerance(0.0, lower_is_better=True),
    }
)
"""Per-metric tolerances; a metric a set does not compute (e.g. recall@100 on the golden set,
abstention recall on BEIR) is not checked there."""


def parse_tolerances(
    items: Sequence[str], base: Mapping[str, Tolerance] | None = None
) -> dict[str, Tolerance]:
    """``metric=max_drop`` overrides (``--tolerance hit@1=0.02``) on top of the defaults."""
    tolerances = dict(base or DEFAULT_TOLERANCES)
    for item in items:
        name, sep, value = item.partition("=")
        try:
            drop = float(value)
        except ValueError:
            drop = math.nan
        if not sep or not name or math.isnan(drop) or drop < 0:
            raise ConfigError(f"tolerance {item!r}: expected METRIC=MAX_DROP, e.g. hit@1=0.01")
        if name not in tolerances:
            known = ", ".join(tolerances)
            raise ConfigError(f"tolerance for unknown metric {name!r}; gated metrics: {known}")
        tolerances[name] = Tolerance(drop, tolerances[name].lower_is_better)
    return tolerances


@dataclass(frozen=True)
class GateSettings:
    """What the gate runs: sets, tolerances, the day the queries are asked on."""

    tolerances: Mapping[str, Tolerance] = field(default_factory=lambda: DEFAULT_TOLERANCES)
    golden: Path | None = DEFAULT_GOLDEN
    extra: tuple[Path, ...] = ()
    split: str = "test"
    today: str | None = None
    listed_queries: int = DEFAULT_LISTED_QUERIES


@dataclass(frozen=True)
class MetricCheck:
    metric: str
    before: float
    after: float
    tolerance: Tolerance

    @property
    def passed(self) -> bool:
        return self.tolerance.allows(self.before, self.after)


@dataclass(frozen=True)
class QueryChange:
    """One query that got worse, in words: ``what`` says how (rank before → after, ...)."""

    query_id: str
    query: str
    category: str
    expected: tuple[str, ...]
    what: str
    severity: float  # larger is worse; orders the listing

    def line(self, set_name: str) -> str:
        expected = ", ".join(self.expected[:3]) or "(should abstain)"
        query = self.query if len(self.query) <= 70 else self.query[:69] + "…"
        head = f"  {set_name} {self.query_id} [{self.category}] {query!r}"
        return f"{head}\n      expected {expected}: {self.what}"


@dataclass
class SetComparison:
    """One evaluation set, before (active) and after (candidate)."""

    name: str
    checks: list[MetricCheck]
    worse: list[QueryChange]
    better: int
    queries: int
    note: str | None = None

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)


@dataclass
class GateReport:
    candidate: str
    active: str
    sets: list[SetComparison] = field(default_factory=list)
    listed: int = DEFAULT_LISTED_QUERIES

    @property
    def passed(self) -> bool:
        return all(s.passed for s in self.sets)

    def render(self) -> str:
        verdict = "PASSES" if self.passed else "BLOCKED"
        lines = [f"quality gate: candidate {self.candidate} vs active {self.active}: {verdict}"]
        header = f"  {'set':<12} {'metric':<21} {'active':>8} {'candidate':>10} {'delta':>8}"
        lines.append(header + f" {'allowed':>8}")
        for comparison in self.sets:
            if comparison.note:
                lines.append(f"  {comparison.name:<12} {comparison.note}")
            for check in comparison.checks:
                delta = check.after - check.before
                sign = "+" if check.tolerance.lower_is_better else "-"
                allowed = f"{sign}{check.tolerance.max_drop:.3f}"
                mark = "" if check.passed else "  << BLOCKS"
                lines.append(
                    f"  {comparison.name:<12} {check.metric:<21} {check.before:>8.3f} "
                    f"{check.after:>10.3f} {delta:>+8.3f} {allowed:>8}"
                    f"{mark}"
                )
        for comparison in self.sets:
            if not comparison.worse and not comparison.better:
                continue
            shown = sorted(comparison.worse, key=lambda c: -c.severity)[: self.listed]
            lines.append(
                f"{comparison.name}: {len(comparison.worse)} of {comparison.queries} queries got "
                f"worse, {comparison.better} better"
                + (
                    f" (the {len(shown)} worst listed)"
                    if len(shown) < len(comparison.worse)
                    else ""
                )
            )
            lines += [change.line(comparison.name) for change in shown]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "candidate": self.candidate,
            "active": self.active,
            "passed": self.passed,
            "sets": [
                {
                    "name": s.name,
                    "passed": s.passed,
                    "note": s.note,
                    "queries": s.queries,
                    "better": s.better,
                    "checks": [
                        {
                            "metric": c.metric,
                            "active": c.before,
                            "candidate": c.after,
                            "max_drop": c.tolerance.max_drop,
                            "passed": c.passed,
                        }
                        for c in s.checks
                    ],
                    "worse": [
                        {
                            "id": w.query_id,
                            "query": w.query,
                            "expected": list(w.expected),
                            "what": w.what,
                        }
                        for w in s.worse
                    ],
                }
                for s in self.sets
            ],
        }


def compare_reports(
    name: str, before: EvalReport, after: EvalReport, tolerances: Mapping[str, Tolerance]
) -> SetComparison:
    """Metric checks plus the per-query diff of two runs of the same set."""
    checks = []
    for metric, tolerance in tolerances.items():
        old, new = before.overall.get(metric), after.overall.get(metric)
        if old is not None and new is not None:
            checks.append(MetricCheck(metric, float(old), float(new), tolerance))
    previous = {o.id: o for o in before.outcomes}
    worse: list[QueryChange] = []
    better = 0
    for outcome in after.outcomes:
        old_outcome = previous.get(outcome.id)
        if old_outcome is None:
            continue
        change = _worse(old_outcome, outcome)
        if change is not None:
            worse.append(change)
        elif _better(old_outcome, outcome):
            better += 1
    return SetComparison(name, checks, worse, better, len(after.outcomes))


def _rank_text(outcome: QueryOutcome) -> str:
    if outcome.abstained and not outcome.should_abstain:
        return "abstained"
    return "not found" if outcome.rank is None else f"rank {outcome.rank}"


def _rank_value(outcome: QueryOutcome) -> float:
    if outcome.abstained or outcome.rank is None:
        return math.inf
    return float(outcome.rank)


def _worse(before: QueryOutcome, after: QueryOutcome) -> QueryChange | None:
    """How ``after`` is worse than ``before``, if it is."""
    reasons: list[str] = []
    severity = 0.0
    if before.should_abstain:
        if before.abstained and not after.abstained:
            top = after.top[0] if after.top else "nothing"
            reasons.append(f"abstained → answered (top: {top})")
            severity += 10
    elif before.judged:
        old, new = _rank_value(before), _rank_value(after)
        if new > old:
            reasons.append(f"{_rank_text(before)} → {_rank_text(after)}")
            severity += (10 if old == 1 else 5 if old <= 3 else 1) + min(new - old, 100) / 100
    if after.leaks > before.leaks:
        reasons.append(f"forbidden results {before.leaks} → {after.leaks}")
        severity += 10
    if before.intent_ok and after.intent_ok is False:
        reasons.append("intent now wrong")
        severity += 5
    if not reasons:
        return None
    return QueryChange(
        after.id, after.query, after.category, after.expected, "; ".join(reasons), severity
    )


def _better(before: QueryOutcome, after: QueryOutcome) -> bool:
    if before.should_abstain:
        return after.abstained and not before.abstained
    return before.judged and _rank_value(after) < _rank_value(before)


async def _golden_reports(
    candidate: KnowledgePackage, active: KnowledgePackage, settings: GateSettings
) -> tuple[EvalReport, EvalReport]:
    assert settings.golden is not None
    queries = load_golden(settings.golden)
    reports = []
    for package in (active, candidate):
        answer = package_answerer(package, today=settings.today)
        with progress_bar(len(queries), f"golden · {package.version}") as advance:
            reports.append(await evaluate(queries, answer, name="golden", progress=advance))
    return reports[0], reports[1]


def _embedder_choice(package: KnowledgePackage) -> str:
    from router.adapters.local.e5_embedder import E5_MODEL_ID
    from router.vectors.hash_embedder import HASH_MODEL_ID

    model = (package.manifest.embedding or {}).get("model")
    return {E5_MODEL_ID: "e5", HASH_MODEL_ID: "hash"}.get(str(model), "none")


async def _extra_comparison(
    folder: Path, candidate: KnowledgePackage, active: KnowledgePackage, settings: GateSettings
) -> SetComparison:
    collection = load_collection(folder, settings.split)
    language = detect_language(collection)
    new_config = build_config_from_manifest(candidate.manifest, language)
    old_config = build_config_from_manifest(active.manifest, language)
    if new_config == old_config and _embedder_choice(candidate) == _embedder_choice(active):
        note = "same build configuration as the active version: cannot have changed (skipped)"
        return SetComparison(collection.name, [], [], 0, len(collection.qrels), note)
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


async def run_gate(
    candidate: KnowledgePackage, active: KnowledgePackage, settings: GateSettings
) -> GateReport:
    """Evaluate both packages on the golden set and the extra collections, then compare."""
    report = GateReport(candidate.version, active.version, listed=settings.listed_queries)
    if settings.golden is not None:
        before, after = await _golden_reports(candidate, active, settings)
        report.sets.append(compare_reports("golden", before, after, settings.tolerances))
    for folder in settings.extra:
        report.sets.append(await _extra_comparison(folder, candidate, active, settings))
    return report


@dataclass(frozen=True)
class GateDecision:
    """Why a candidate may be activated: the gate passed, or there was nothing to gate."""

    reason: str
    baseline: str | None
    report: GateReport | None = None
    forced: bool = False


async def gate_or_force(
    candidate: KnowledgePackage,
    kv: KeyValueStore,
    blobs: BlobStore,
    *,
    force: bool = False,
    settings: GateSettings | None = None,
) -> GateDecision:
    """Decide whether ``candidate`` may replace the version active in ``kv``/``blobs``.

    Raises :class:`QualityGateError` (its ``details`` is the readable diff) when the candidate
    is worse than the active version beyond a tolerance; ``force`` skips the comparison (the
    caller logs the forced activation). Works for any deployment the ports reach: the local
    state for ``kr build``, a publish target for ``kr publish``. Never activates anything.
    """
    settings = settings or GateSettings()
    active_version = await kv.get(ACTIVE_VERSION_KEY)
    if force:
        return GateDecision("forced (gate skipped)", active_version, forced=True)
    if not active_version:
        return GateDecision("first version: nothing to compare with", None)
    if active_version == candidate.version:
        return GateDecision("already active", active_version)
    golden = settings.golden
    if golden is not None and not golden.is_file():
        say(f"note: no golden set at {golden}: the gate compares the extra sets only")
        golden = None
    if golden is None and not settings.extra:
        return GateDecision("no evaluation set to gate on", active_version)
    try:
        baseline = await full_loader(kv, blobs).load(active_version)
    except (PackageFormatError, BindingError) as exc:
        say(f"note: the active version {active_version} cannot be loaded ({exc.message})")
        return GateDecision("active version unreadable: nothing to compare with", active_version)
    settings = GateSettings(
        settings.tolerances, golden, settings.extra, settings.split, settings.today,
        settings.listed_queries,
    )  # fmt: skip
    report = await run_gate(candidate, baseline, settings)
    if not report.passed:
        failed = [
            f"{s.name} {c.metric} {c.before:.3f} → {c.after:.3f}"
            for s in report.sets
            for c in s.checks
            if not c.passed
        ]
        more = f"; {len(failed) - 3} more" if len(failed) > 3 else ""
        raise QualityGateError(
            f"{candidate.version} is worse than the active {active_version} "
            f"({'; '.join(failed[:3])}{more}): not activated (--force activates it anyway)",
            details=report.render(),
        )
    return GateDecision("gate passed", active_version, report)


class ActivationLog:
    """``activations.jsonl`` in the state folder: one JSON line per activation or rollback."""

    def __init__(self, state_root: Path) -> None:
        self.path = Path(state_root) / ACTIVATION_LOG

    def record(
        self, command: str, version: str, previous: str | None, reason: str, forced: bool
    ) -> None:
        entry = {
            "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "command": command,
            "version": version,
            "previous": previous,
            "reason": reason,
            "forced": forced,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, ensure_ascii=False) + "\n")

    def entries(self) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        lines = self.path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]


async def rollback(kv: KeyValueStore, blobs: BlobStore) -> tuple[str, str]:
    """Activate the previous version; returns (now active, rolled back from).

    The previous version is loaded (and so verified) before the switch, so a rollback never
    activates a damaged package. :func:`router.publisher.activate` remembers the version
    rolled back from as the new previous one: a second rollback undoes the first.
    """
    active = await kv.get(ACTIVE_VERSION_KEY)
    if not active:
        raise NoActiveVersionError("no knowledge version is active: nothing to roll back")
    previous = await kv.get(PREVIOUS_VERSION_KEY)
    if not previous or previous == active:
        raise NoPreviousVersionError(
            f"{active} is active and no previous version is recorded: nothing to roll back to"
        )
    await full_loader(kv, blobs).load(previous)
    await activate(kv, previous)
    return previous, active
