"""Gate decision: may a candidate replace the active version of a deployment?

Why compare with the active version rather than fixed floors: the golden set grows and the
cascade improves, so "not worse than what serves now" is the invariant that holds over time
(PRD §40–42: quality is measured on every index change, and a worse index never goes live).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kr.gate.report import GateReport
from kr.gate.runs import GateSettings, run_gate
from kr.packages import full_loader
from kr.progress import say
from router.errors import BindingError, PackageFormatError, QualityGateError
from router.package.reader import KnowledgePackage
from router.ports import ACTIVE_VERSION_KEY, BlobStore, KeyValueStore

__all__ = ["ALREADY_ACTIVE", "GateDecision", "gate_or_force"]

ALREADY_ACTIVE = "already active"
"""The decision's reason when the candidate is the active version: nothing to activate."""
FAILED_CHECKS_NAMED = 3  # failed checks named in the error message (the report has them all)


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
        return GateDecision(ALREADY_ACTIVE, active_version)
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
    report = await run_gate(candidate, baseline, replace(settings, golden=golden))
    if not report.passed:
        raise _blocked(candidate.version, active_version, report)
    return GateDecision("gate passed", active_version, report)


def _blocked(candidate: str, active: str, report: GateReport) -> QualityGateError:
    failed = [
        f"{s.name} {c.metric} {c.before:.3f} → {c.after:.3f}"
        for s in report.sets
        for c in s.checks
        if not c.passed
    ]
    named = "; ".join(failed[:FAILED_CHECKS_NAMED])
    more = (
        f"; {len(failed) - FAILED_CHECKS_NAMED} more" if len(failed) > FAILED_CHECKS_NAMED else ""
    )
    return QualityGateError(
        f"{candidate} is worse than the active {active} "
        f"({named}{more}): not activated (--force activates it anyway)",
        details=report.render(),
    )
