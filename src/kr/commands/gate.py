"""``kr gate``: compare a built package with the active version; exit 3 if it is worse."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path

from kr.activation import activate_gated
from kr.commands.options import gate_settings
from kr.gate.decision import ALREADY_ACTIVE, GateDecision, gate_or_force
from kr.gate.runs import GateSettings
from kr.local import local_state
from kr.packages import (
    package_folder_files,
    require_stored_version,
    stored_package,
    stored_package_files,
)
from router.adapters.local.state import LocalState
from router.ops.publish import read_package
from router.package.reader import KnowledgePackage

__all__ = ["gate_command", "resolve_candidate", "run"]


async def run(args: argparse.Namespace) -> int:
    decision = await gate_command(
        args.candidate, local_state(args.state), gate_settings(args), activate_now=args.activate
    )
    if args.json and decision.report is not None:
        print(json.dumps(decision.report.to_json(), ensure_ascii=False))
    verb = "activated" if args.activate and decision.reason != ALREADY_ACTIVE else "may go live"
    print(f"gate: {decision.reason} (active before: {decision.baseline or 'none'}); {verb}")
    return 0


async def resolve_candidate(
    spec: str, state: LocalState
) -> tuple[KnowledgePackage, Mapping[str, bytes] | None]:
    """A package folder (its files, to publish) or a version already in the local state."""
    path = Path(spec)
    if path.is_dir():
        files = package_folder_files(path)
        return read_package(files), files
    version = await require_stored_version(spec, state)
    return await stored_package(state, version), None


async def gate_command(
    spec: str, state: LocalState, settings: GateSettings, *, activate_now: bool
) -> GateDecision:
    """Compare a candidate with the active version; with ``activate_now``, activate it if the
    gate passes. Raises ``QualityGateError`` when it does not."""
    candidate, files = await resolve_candidate(spec, state)
    if activate_now:
        if files is None:  # already in the state: publishing again is a no-op
            files = await stored_package_files(state, candidate.version)
        _, decision = await activate_gated(
            files, state, force=False, settings=settings, command="gate"
        )
        return decision
    decision = await gate_or_force(candidate, state.kv, state.blobs, settings=settings)
    if decision.report is not None:
        print(decision.report.render())
    return decision
