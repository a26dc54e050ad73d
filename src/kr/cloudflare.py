"""Where ``kr`` reaches Cloudflare: wrangler's local state, or the Cloudflare API.

Why the adapters are imported inside the functions: every ``kr`` command reads this module's
constants, and only ``kr publish`` and a remote ``kr rollback`` need the HTTP client or wrangler.
The settings come from the flags, then the environment, then ``wrangler.toml``
(:meth:`router.adapters.cloudflare_api.config.CloudflareSettings.resolve`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from router.errors import ConfigError
from router.ops.publish import PublishTarget
from router.package.version.manifest import Manifest

if TYPE_CHECKING:
    from router.adapters.cloudflare_api import CloudflareAPI, CloudflareSettings

__all__ = [
    "DEFAULT_WRANGLER_TOML",
    "ENVIRONMENTS",
    "account_description",
    "api_target",
    "cloudflare_api",
    "cloudflare_settings",
    "wrangler_target",
]

DEFAULT_WRANGLER_TOML = Path("wrangler.toml")
ENVIRONMENTS = ("dev", "production")
"""The ``[env.NAME]`` sections of wrangler.toml a command may target."""


def wrangler_target(
    config: Path | None, env: str | None, persist_to: Path | None
) -> tuple[PublishTarget, str]:
    """A publish target in wrangler's local state (``wrangler … --local``), and its name for
    people."""
    from router.adapters.cloudflare_api.config import D1_BINDING, KV_BINDING, read_wrangler_bindings
    from router.adapters.wrangler_cli import (
        Wrangler,
        WranglerD1Store,
        WranglerKVStore,
        WranglerR2Store,
        find_wrangler,
    )

    toml = (config or DEFAULT_WRANGLER_TOML).resolve()
    bindings = read_wrangler_bindings(toml, env, strict_env=False)
    if not bindings.bucket:
        raise ConfigError(
            f"{bindings.source} declares no R2 bucket for the KNOWLEDGE_BUCKET binding"
        )
    persist = persist_to.resolve() if persist_to else None
    wrangler = Wrangler(find_wrangler(toml.parent, os.environ), toml, persist, env)
    target = PublishTarget(
        name=wrangler.state_name,
        blobs=WranglerR2Store(wrangler, bindings.bucket),
        kv=WranglerKVStore(wrangler, KV_BINDING),
        relational=WranglerD1Store(wrangler, D1_BINDING),
        reuse_objects=False,  # each presence question is a wrangler process, as an upload is
    )
    where = f"wrangler's local state ({persist or toml.parent / '.wrangler' / 'state'})"
    return target, where


def cloudflare_settings(
    config: Path | None, env: str | None, options: Mapping[str, str | None]
) -> CloudflareSettings:
    """The account, token and resource ids: ``options`` (flags), the environment, then
    ``config`` or ./wrangler.toml when there is one."""
    from router.adapters.cloudflare_api import CloudflareSettings

    toml = config or (DEFAULT_WRANGLER_TOML if DEFAULT_WRANGLER_TOML.exists() else None)
    return CloudflareSettings.resolve(
        wrangler_toml=toml, env=env, environ=os.environ, options=options
    )


def cloudflare_api(settings: CloudflareSettings) -> CloudflareAPI:
    """The API client of ``settings`` (an async context manager owning its HTTP client)."""
    from router.adapters.cloudflare_api import CloudflareAPI

    return CloudflareAPI(settings.account_id, settings.api_token, settings.base_url)


def account_description(settings: CloudflareSettings) -> str:
    """``Cloudflare account … (R2 …, KV …, D1 …[, Vectorize …])``, for progress lines."""
    vectorize = f", Vectorize {settings.vectorize_index}" if settings.vectorize_index else ""
    return (
        f"Cloudflare account {settings.account_id} (R2 {settings.bucket}, "
        f"KV {settings.kv_namespace_id}, D1 {settings.d1_database_id}{vectorize})"
    )


def api_target(
    api: CloudflareAPI, settings: CloudflareSettings, manifest: Manifest
) -> PublishTarget:
    """R2, KV, D1 and (when the package has vectors and an index is set) Vectorize."""
    from router.adapters.cloudflare_api import (
        D1Database,
        D1RelationalStore,
        KVNamespaceStore,
        R2ObjectStore,
        VectorizeIndex,
    )

    vectors = None
    if manifest.embedding and settings.vectorize_index:
        dimensions = int(manifest.embedding["dimensions"])
        vectors = VectorizeIndex(api, settings.vectorize_index, dimensions)
    return PublishTarget(
        name=settings.target_name,
        blobs=R2ObjectStore(api, settings.bucket),
        kv=KVNamespaceStore(api, settings.kv_namespace_id),
        relational=D1RelationalStore(D1Database(api, settings.d1_database_id)),
        vectors=vectors,
    )
