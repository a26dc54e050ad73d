"""Where a publish goes: account, token and resource ids from options, environment, wrangler.toml.

Why wrangler.toml: it already names the four bindings the Worker reads (``KNOWLEDGE_KV``,
``KNOWLEDGE_BUCKET``, ``KNOWLEDGE_DB``, ``KNOWLEDGE_VECTORS``), so ``kr publish`` writes exactly
the resources the deployed Worker is bound to. Precedence: command-line option, then environment
variable, then wrangler.toml. With ``--env NAME`` the bindings come from ``[env.NAME]`` only —
wrangler does not inherit bindings into environments, and neither does this, so a production
publish can never fall back to the development resources. Placeholder ids (zeros, as in the
checked-in wrangler.toml) count as missing. The token comes from the environment only.
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from router.adapters.cloudflare_api.client import DEFAULT_API_BASE
from router.errors import ConfigError

__all__ = [
    "D1_BINDING",
    "ENV_ACCOUNT",
    "ENV_API_BASE",
    "ENV_TOKEN",
    "KV_BINDING",
    "R2_BINDING",
    "VECTORS_BINDING",
    "CloudflareAccount",
    "CloudflareSettings",
    "WranglerBindings",
    "read_wrangler_bindings",
]

KV_BINDING = "KNOWLEDGE_KV"
R2_BINDING = "KNOWLEDGE_BUCKET"
D1_BINDING = "KNOWLEDGE_DB"
VECTORS_BINDING = "KNOWLEDGE_VECTORS"

ENV_TOKEN = "CLOUDFLARE_API_TOKEN"
ENV_ACCOUNT = "CLOUDFLARE_ACCOUNT_ID"
ENV_API_BASE = "CLOUDFLARE_API_BASE_URL"
ENV_BUCKET = "KR_R2_BUCKET"
ENV_KV = "KR_KV_NAMESPACE_ID"
ENV_D1 = "KR_D1_DATABASE_ID"
ENV_VECTORIZE = "KR_VECTORIZE_INDEX"


def _placeholder(value: str | None) -> bool:
    """Empty, or zeros but for the last character (``0…0``, ``0…01``: wrangler.toml's "replace
    me" ids); a real id is random hex."""
    digits = (value or "").replace("-", "")
    return not digits or (len(digits) >= 16 and set(digits[:-1]) <= {"0"})


@dataclass(frozen=True)
class WranglerBindings:
    """The four bindings' resources in wrangler.toml, for one environment (None: absent)."""

    account_id: str | None = None
    bucket: str | None = None
    kv_namespace_id: str | None = None
    d1_database_id: str | None = None
    d1_database_name: str | None = None
    vectorize_index: str | None = None
    source: str = "wrangler.toml"


def _binding(section: Mapping[str, Any], table: str, binding: str) -> Mapping[str, Any]:
    for entry in section.get(table) or []:
        if isinstance(entry, Mapping) and entry.get("binding") == binding:
            return entry
    return {}


def read_wrangler_bindings(
    path: Path, env: str | None = None, *, strict_env: bool = True
) -> WranglerBindings:
    """Read the bindings of ``path`` (top level, or ``[env.<env>]``).

    ``strict_env``: a missing ``[env.<env>]`` is an error (remote publishing); otherwise the top
    level is used, as wrangler itself does for local state.
    """
    try:
        config = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{path} not found (pass --config PATH/wrangler.toml)") from exc
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    section: Mapping[str, Any] = config
    source = str(path)
    if env:
        envs = config.get("env") or {}
        if env in envs:
            section = envs[env]
            source = f"[env.{env}] of {path}"
        elif strict_env:
            known = ", ".join(sorted(envs)) or "none"
            raise ConfigError(
                f"{path} has no [env.{env}] (environments: {known}); declare the bindings "
                f"there, or set {ENV_BUCKET}, {ENV_KV}, {ENV_D1}, {ENV_VECTORIZE}"
            )
    account = section.get("account_id") or config.get("account_id")
    d1 = _binding(section, "d1_databases", D1_BINDING)
    return WranglerBindings(
        account_id=account,
        bucket=_binding(section, "r2_buckets", R2_BINDING).get("bucket_name"),
        kv_namespace_id=_binding(section, "kv_namespaces", KV_BINDING).get("id"),
        d1_database_id=d1.get("database_id"),
        d1_database_name=d1.get("database_name"),
        vectorize_index=_binding(section, "vectorize", VECTORS_BINDING).get("index_name"),
        source=source,
    )


@dataclass(frozen=True)
class CloudflareAccount:
    """An account and its API token alone: what calling Workers AI needs (``kr build --embedder
    workers-ai:…``, and the local query side of such a package), with no resource ids."""

    account_id: str
    api_token: str
    base_url: str = DEFAULT_API_BASE

    @classmethod
    def resolve(
        cls, environ: Mapping[str, str], wrangler_toml: Path | None = None, *, purpose: str
    ) -> CloudflareAccount:
        """``CLOUDFLARE_ACCOUNT_ID`` (else ``account_id`` in ``wrangler_toml``),
        ``CLOUDFLARE_API_TOKEN``, ``CLOUDFLARE_API_BASE_URL``; ConfigError naming what is
        missing and ``purpose`` (what it was needed for)."""
        account = environ.get(ENV_ACCOUNT, "").strip()
        if not account and wrangler_toml is not None and wrangler_toml.exists():
            account = read_wrangler_bindings(wrangler_toml).account_id or ""
        token = environ.get(ENV_TOKEN, "").strip()
        missing = []
        if not token:
            missing.append(f"{ENV_TOKEN} (an API token with the Workers AI permission)")
        if not account or _placeholder(account):
            missing.append(f"{ENV_ACCOUNT} (or account_id in wrangler.toml)")
        if missing:
            raise ConfigError(f"{purpose} needs the Cloudflare API; missing: {'; '.join(missing)}")
        base_url = environ.get(ENV_API_BASE) or DEFAULT_API_BASE
        return cls(account_id=account, api_token=token, base_url=base_url)


@dataclass(frozen=True)
class CloudflareSettings:
    """Everything a remote publish needs; :meth:`resolve` explains what is missing."""

    account_id: str
    api_token: str
    bucket: str
    kv_namespace_id: str
    d1_database_id: str
    vectorize_index: str | None
    base_url: str = DEFAULT_API_BASE

    @property
    def target_name(self) -> str:
        """Identity of the deployment for the publish journal (no secret in it)."""
        parts = (self.base_url, self.account_id, self.bucket, self.kv_namespace_id)
        ids = "|".join((*parts, self.d1_database_id, self.vectorize_index or ""))
        return f"cloudflare:{self.account_id}:{hashlib.sha256(ids.encode()).hexdigest()[:12]}"

    @classmethod
    def resolve(
        cls,
        *,
        wrangler_toml: Path | None,
        env: str | None,
        environ: Mapping[str, str],
        options: Mapping[str, str | None] | None = None,
    ) -> CloudflareSettings:
        """Merge options > environment > wrangler.toml; ConfigError listing what is missing.

        ``options`` keys: ``account_id``, ``bucket``, ``kv_namespace_id``, ``d1_database_id``,
        ``vectorize_index``, ``base_url``.
        """
        options = options or {}
        toml = WranglerBindings()
        if wrangler_toml is not None:
            toml = read_wrangler_bindings(wrangler_toml, env)

        def pick(key: str, variable: str, from_toml: str | None) -> str | None:
            for value in (options.get(key), environ.get(variable), from_toml):
                if value and not _placeholder(value):
                    return value
            return None

        token = environ.get(ENV_TOKEN, "").strip()
        values = {
            "account_id": pick("account_id", ENV_ACCOUNT, toml.account_id),
            "bucket": pick("bucket", ENV_BUCKET, toml.bucket),
            "kv_namespace_id": pick("kv_namespace_id", ENV_KV, toml.kv_namespace_id),
            "d1_database_id": pick("d1_database_id", ENV_D1, toml.d1_database_id),
        }
        hints = {
            "account_id": f"--account-id or {ENV_ACCOUNT} (or account_id in wrangler.toml)",
            "bucket": f"--bucket or {ENV_BUCKET} (or the {R2_BINDING} binding)",
            "kv_namespace_id": f"--kv-namespace-id or {ENV_KV} (or the {KV_BINDING} id)",
            "d1_database_id": f"--d1-database-id or {ENV_D1} (or the {D1_BINDING} database_id)",
        }
        missing = [hints[key] for key, value in values.items() if not value]
        if not token:
            missing.insert(0, f"{ENV_TOKEN} (an API token with R2, KV, D1 and Vectorize edit)")
        if missing:
            where = f"bindings read from {toml.source}" if wrangler_toml else "no wrangler.toml"
            hint = (
                ""
                if env
                else "; the top level of wrangler.toml is local development: pass --env dev "
                "or --env production for a deployment's bindings"
            )
            raise ConfigError(
                f"cannot publish to Cloudflare, missing: {'; '.join(missing)} ({where}{hint})"
            )
        base_url = options.get("base_url") or environ.get(ENV_API_BASE) or DEFAULT_API_BASE
        return cls(
            account_id=str(values["account_id"]),
            api_token=token,
            bucket=str(values["bucket"]),
            kv_namespace_id=str(values["kv_namespace_id"]),
            d1_database_id=str(values["d1_database_id"]),
            vectorize_index=pick("vectorize_index", ENV_VECTORIZE, toml.vectorize_index),
            base_url=base_url,
        )
