"""``kr publish``: send a built package to Cloudflare (R2, D1, Vectorize, then the KV switch).

Why resumable: every finished step is journaled in the state folder, so running the same command
again continues where it stopped, and does nothing once done.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from kr.activation import ActivationLog, gated_publish
from kr.cloudflare import (
    account_description,
    api_target,
    cloudflare_api,
    cloudflare_settings,
    wrangler_target,
)
from kr.commands.options import gate_settings
from kr.local import local_state
from kr.packages import package_folder_files, require_stored_version, stored_package_files
from router.adapters.local.state import default_state_dir
from router.errors import ConfigError, NoActiveVersionError
from router.ops.publish import PublishTarget
from router.ops.publish_plan import ACTIVATE_STEP
from router.ops.publish_report import PublishReport
from router.package.version.fetch import is_version_id
from router.package.version.manifest import MANIFEST_NAME, Manifest
from router.ports import ACTIVE_VERSION_KEY, PublishJournal

__all__ = ["publish_files", "run"]

REMOTE_ONLY = {
    "--api-base": "api_base",
    "--account-id": "account_id",
    "--bucket": "bucket",
    "--kv-namespace-id": "kv_namespace_id",
    "--d1-database-id": "d1_database_id",
    "--vectorize-index": "vectorize_index",
}
"""Flags (and their argument names) that only make sense for the Cloudflare API."""


async def publish_files(spec: str | None, state_root: Path | None) -> dict[str, bytes]:
    """The files of the package to publish: a folder, a version of the local state, or the
    version active in the local state (what ``kr build`` last activated)."""
    if spec and Path(spec).is_dir():
        return package_folder_files(Path(spec))
    if spec and not is_version_id(spec):  # refused before the state folder is created
        raise ConfigError(f"{spec!r} is neither a package folder nor a knowledge version")
    state = local_state(state_root)
    version = spec or await state.kv.get(ACTIVE_VERSION_KEY)
    if not version:
        raise NoActiveVersionError(
            f"nothing to publish: no version is active in {state.root}; run `kr build` first "
            "or pass a package folder"
        )
    await require_stored_version(version, state)
    return await stored_package_files(state, version)


async def run(args: argparse.Namespace) -> int:
    _check_flags(args)
    files = await publish_files(args.package, args.state)
    manifest = Manifest.from_bytes(files[MANIFEST_NAME])
    journal = _journal(args.state)
    activate_now = not args.no_activate
    if args.local:
        target, where = wrangler_target(args.config, args.env, args.persist_to)
        print(f"publishing {manifest.knowledge_version} to {where}", flush=True)
        report = await _gated_publish(args, files, target, journal, activate_now)
    else:
        report, where = await _publish_remote(args, files, manifest, journal, activate_now)
    if report.vectors_skipped:
        print(
            f"note: Vectorize has no local mode in wrangler; {report.vectors_skipped} section "
            "vectors were not upserted (publish without --local to send them to Vectorize)"
        )
    _print_outcome(report, where)
    return 0


def _check_flags(args: argparse.Namespace) -> None:
    if args.persist_to and not args.local:
        raise ConfigError("--persist-to is for --local (wrangler's local state)")
    remote_only = [flag for flag, name in REMOTE_ONLY.items() if getattr(args, name)]
    if args.local and remote_only:
        raise ConfigError(f"{remote_only[0]} is for remote publishing, not --local")


def _journal(state_root: Path | None) -> PublishJournal:
    from router.adapters.local.journal import JOURNAL_DIR, FileJournal

    return FileJournal((state_root or default_state_dir()) / JOURNAL_DIR)


def _print_step(step: str, status: str) -> None:
    if status == "done":
        print(f"  done  {step}", flush=True)
    elif status == "skip":
        print(f"  skip  {step} (already done)", flush=True)


async def _gated_publish(
    args: argparse.Namespace,
    files: Mapping[str, bytes],
    target: PublishTarget,
    journal: PublishJournal,
    activate_now: bool,
) -> PublishReport:
    return await gated_publish(
        files,
        target,
        journal,
        activate_now=activate_now,
        force=args.force,
        settings=gate_settings(args),
        log=ActivationLog(args.state or default_state_dir()),
        on_step=_print_step,
    )


async def _publish_remote(
    args: argparse.Namespace,
    files: Mapping[str, bytes],
    manifest: Manifest,
    journal: PublishJournal,
    activate_now: bool,
) -> tuple[PublishReport, str]:
    settings = cloudflare_settings(
        args.config,
        args.env,
        {
            "account_id": args.account_id,
            "bucket": args.bucket,
            "kv_namespace_id": args.kv_namespace_id,
            "d1_database_id": args.d1_database_id,
            "vectorize_index": args.vectorize_index,
            "base_url": args.api_base,
        },
    )
    if manifest.embedding and not settings.vectorize_index:
        raise ConfigError(
            "the package has section vectors but no Vectorize index is configured: declare the "
            "KNOWLEDGE_VECTORS binding in wrangler.toml, or pass --vectorize-index"
        )
    where = account_description(settings)
    print(f"publishing {manifest.knowledge_version} to {where}", flush=True)
    async with cloudflare_api(settings) as api:
        target = api_target(api, settings, manifest)
        await _check_vector_index(target)
        report = await _gated_publish(args, files, target, journal, activate_now)
    return report, where


async def _check_vector_index(target: PublishTarget) -> None:
    """The Vectorize index must have the package's dimensions (checked before any upload)."""
    from router.adapters.cloudflare_api import VectorizeIndex

    if isinstance(target.vectors, VectorizeIndex):
        await target.vectors.check_config()


def _print_outcome(report: PublishReport, where: str) -> None:
    version = report.version
    if report.blobs_uploaded or report.blobs_reused:
        print(report.blob_summary())
    if report.nothing_to_do:
        state = "active" if ACTIVATE_STEP in report.steps else "published"
        print(f"knowledge version {version} was already {state} on {where}: nothing to do")
    elif report.activated:
        previous = f" (previous: {report.previous_version})" if report.previous_version else ""
        print(f"knowledge version {version} active on {where}{previous}")
    else:
        print(
            f"knowledge version {version} published to {where}, not activated "
            f"(`kr publish {version}` without --no-activate activates it)"
        )
