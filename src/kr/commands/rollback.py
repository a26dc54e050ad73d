"""``kr rollback``: activate the previous knowledge version, locally or on Cloudflare."""

from __future__ import annotations

import argparse

from kr.activation import rollback, rollback_local
from kr.cloudflare import cloudflare_api, cloudflare_settings
from kr.local import local_state

__all__ = ["run"]


async def run(args: argparse.Namespace) -> int:
    if args.env or args.api_base:
        return await _rollback_remote(args)
    state = local_state(args.state)
    now, before = await rollback_local(state)
    print(
        f"knowledge version {now} active in {state.root} (rolled back from {before}; "
        "`kr rollback` again returns to it)"
    )
    return 0


async def _rollback_remote(args: argparse.Namespace) -> int:
    """The previous version back on Cloudflare: verified from R2, then the KV switch."""
    from router.adapters.cloudflare_api import KVNamespaceStore, R2ObjectStore

    settings = cloudflare_settings(args.config, args.env, {"base_url": args.api_base})
    async with cloudflare_api(settings) as api:
        kv = KVNamespaceStore(api, settings.kv_namespace_id)
        now, before = await rollback(kv, R2ObjectStore(api, settings.bucket))
    print(
        f"knowledge version {now} active on Cloudflare account {settings.account_id} "
        f"(rolled back from {before}; the Worker serves it within its version TTL)"
    )
    return 0
