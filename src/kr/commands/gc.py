"""``kr gc --keep N``: delete the versions and shared objects no kept version needs.

Why a command of its own, and not part of publish: old versions are rollback material
(docs/adr/0008); when to let them go is the operator's call. Local state by default; with
``--env`` or ``--api-base``, the Cloudflare account (R2, D1, Vectorize) through the REST API.
What is kept and why: :mod:`router.ops.gc`. Locally it also deletes the logged queries and
questions older than the log retention (``--log-retention-days``, else
``$KR_LOG_RETENTION_DAYS``, else 30 days; :mod:`router.ops.retention`, as the Worker's
scheduled handler does on D1).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from kr.cloudflare import account_description, cloudflare_api, cloudflare_settings
from kr.local import local_log_policy, local_state
from router.adapters.local.journal import JOURNAL_DIR, FileJournal
from router.adapters.local.state import default_state_dir
from router.ops.gc import GcPlan, collect, plan_gc
from router.ops.questions import ALL_TENANTS
from router.ops.retention import apply_retention

__all__ = ["run"]


async def run(args: argparse.Namespace) -> int:
    if args.env or args.api_base:
        return await _gc_remote(args)
    state = local_state(args.state)
    plan = await plan_gc(state.blobs, state.kv, state.relational, args.keep)
    _print_plan(plan, str(state.root), args.dry_run)
    if not args.dry_run:
        await collect(plan, state.blobs, state.relational)
        _print_done(plan, str(state.root))
    days = getattr(args, "log_retention_days", None) or local_log_policy().retention_days
    now = time.time()
    if args.dry_run:
        old = await state.question_log.count(0.0, now - days * 86400.0, ALL_TENANTS)
        print(f"would delete {old:,} logged question(s) older than {days:g} days")
    else:
        report = await apply_retention(state.query_log, state.question_log, days, now=now)
        if report.error:
            print(f"log retention failed: {report.error}")
            return 1
        print(
            f"deleted {report.questions_deleted:,} logged question(s) and "
            f"{report.query_hours_deleted:,} query-log hour(s) older than {days:g} days"
        )
    return 0


async def _gc_remote(args: argparse.Namespace) -> int:
    """The same collection on Cloudflare; the publish journal of each dropped version on this
    account is removed from the state folder too."""
    from router.adapters.cloudflare_api import (
        D1Database,
        D1RelationalStore,
        KVNamespaceStore,
        R2ObjectStore,
        VectorizeIndex,
    )

    settings = cloudflare_settings(args.config, args.env, {"base_url": args.api_base})
    where = account_description(settings)
    journal = FileJournal(Path(args.state or default_state_dir()) / JOURNAL_DIR)

    async def forget(version: str) -> None:
        await journal.discard(settings.target_name, version)

    async with cloudflare_api(settings) as api:
        blobs = R2ObjectStore(api, settings.bucket)
        rows = D1RelationalStore(D1Database(api, settings.d1_database_id))
        vectors = None
        if settings.vectorize_index:  # deletes by id need no dimensions
            vectors = VectorizeIndex(api, settings.vectorize_index, dimensions=0)
        kv = KVNamespaceStore(api, settings.kv_namespace_id)
        plan = await plan_gc(blobs, kv, rows, args.keep, with_vectors=vectors is not None)
        _print_plan(plan, where, args.dry_run)
        if not args.dry_run:
            await collect(plan, blobs, rows, vectors, forget)
            _print_done(plan, where)
    return 0


def _print_plan(plan: GcPlan, where: str, dry_run: bool) -> None:
    roles = {plan.active: "active", plan.previous: "previous (rollback)"}
    print(f"kr gc on {where}: keeping {len(plan.kept)} version(s), dropping {len(plan.dropped)}")
    for version in plan.kept:
        print(f"  keep  {version}" + (f"  ({roles[version]})" if version in roles else ""))
    for version in plan.dropped:
        print(f"  drop  {version}")
    verb = "would delete" if dry_run else "deleting"
    print(
        f"{verb}: {len(plan.version_keys):,} files of dropped versions, "
        f"{len(plan.object_keys):,} shared objects no kept version names "
        f"({plan.objects_kept:,} kept), D1 rows of {len(plan.rows)} version(s), "
        f"{len(plan.vector_ids):,} vectors"
    )
    if dry_run:
        print("dry run: nothing was deleted")


def _print_done(plan: GcPlan, where: str) -> None:
    print(f"done: {len(plan.delete_keys):,} blobs deleted from {where}")
