"""Activation of a knowledge version: through the gate, forced, or rolled back; and its log.

Why a log of activations: a forced activation (``--force``) or a rollback changes what users get
without the gate's approval; ``activations.jsonl`` in the state folder keeps who did what, when.

Why the blobs go up before the gate runs: a blocked candidate stays available (inactive) for
``kr gate VERSION --activate`` or ``kr publish VERSION`` after a fix of the tolerances, and the
active version is untouched.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kr.gate.decision import ALREADY_ACTIVE, GateDecision, gate_or_force
from kr.gate.runs import GateSettings
from kr.packages import full_loader
from router.adapters.local.state import LocalState
from router.errors import NoActiveVersionError, NoPreviousVersionError
from router.ops.activation import activate
from router.ops.publish import PublishTarget, StepCallback, publish, publish_direct, read_package
from router.ops.publish_report import PublishReport
from router.ports import (
    ACTIVE_VERSION_KEY,
    PREVIOUS_VERSION_KEY,
    BlobStore,
    KeyValueStore,
    PublishJournal,
)

__all__ = [
    "ACTIVATION_LOG",
    "ActivationLog",
    "activate_gated",
    "gated_publish",
    "rollback",
    "rollback_local",
]

ACTIVATION_LOG = "activations.jsonl"


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


async def activate_gated(
    files: Mapping[str, bytes],
    state: LocalState,
    *,
    force: bool,
    settings: GateSettings,
    command: str,
) -> tuple[str, GateDecision]:
    """Publish ``files`` to the local state, gate them against the active version, activate.

    Raises ``QualityGateError`` if blocked (the blobs stay, inactive: see the module doc).
    """
    candidate = read_package(files)
    staged = await publish_direct(
        files, state.blobs, state.kv, state.relational, activate_now=False
    )
    version = staged.version
    print(f"{staged.blob_summary()} in {state.root}")
    decision = await gate_or_force(candidate, state.kv, state.blobs, force=force, settings=settings)
    if decision.report is not None:
        print(decision.report.render())
    if decision.reason != ALREADY_ACTIVE:
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
    report.blobs_uploaded, report.bytes_uploaded = staged.blobs_uploaded, staged.bytes_uploaded
    report.blobs_reused, report.bytes_reused = staged.blobs_reused, staged.bytes_reused
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


async def rollback(kv: KeyValueStore, blobs: BlobStore) -> tuple[str, str]:
    """Activate the previous version; returns (now active, rolled back from).

    The previous version is loaded (and so verified) before the switch, so a rollback never
    activates a damaged package. :func:`router.ops.publish.activate` remembers the version
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


async def rollback_local(state: LocalState) -> tuple[str, str]:
    """Roll the local state back and log it; returns (now active, rolled back from)."""
    now, before = await rollback(state.kv, state.blobs)
    ActivationLog(state.root).record("rollback", now, before, "rollback", forced=False)
    return now, before
