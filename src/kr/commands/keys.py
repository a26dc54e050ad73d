"""``kr keys create|list|revoke``: the API keys of the local state folder (D1's ``api_keys``).

Why the key is printed alone: ``KEY=$(kr keys create --tenant T)`` is the way to take it, and
it is shown only this once (only its hash is stored); everything else goes to stderr.

Why ``--sql FILE``: the Worker reads its keys from Cloudflare D1, which ``kr`` does not write;
the file holds the one ``INSERT`` (the key's id, tenant, hash and date — never the key) for
``wrangler d1 execute KNOWLEDGE_DB --remote --file FILE``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kr.local import local_keys
from router.adapters.wrangler_cli import render_statement
from router.auth.api_keys import KEY_INSERT, ApiKey, check_tenant
from router.errors import ConfigError, InvalidRequestError
from router.knowledge.tenants import TENANT_ID_RULE, is_tenant_id

__all__ = ["run"]


async def run(args: argparse.Namespace) -> int:
    keys = local_keys(args.state)
    if args.keys_command == "create":
        plaintext, record = keys.create(check_tenant(_tenant_id(args.tenant)))
        print(plaintext)
        print(
            f"key {record.key_id} for tenant {record.tenant} created; it is not shown again",
            file=sys.stderr,
        )
        if args.sql is not None:
            _write_sql(args.sql, record)
        return 0
    if args.keys_command == "revoke":
        if not keys.revoke(args.key_id):
            raise InvalidRequestError(f"no working key with id {args.key_id!r}")
        print(f"key {args.key_id} revoked", file=sys.stderr)
        return 0
    for key in keys.list():
        state = f"revoked {key.revoked_at}" if key.revoked else "active"
        print(f"{key.key_id}\t{key.tenant}\t{key.created_at}\t{state}")
    return 0


def _tenant_id(tenant: str) -> str:
    """The tenant of a new key, if it is a tenant id (``router.knowledge.tenants``): the
    grammar ``kr build`` checks ``tenant:`` against, so every key can reach its documents."""
    if not is_tenant_id(tenant):
        raise ConfigError(f"not a valid tenant id: {tenant!r} ({TENANT_ID_RULE})")
    return tenant


def _write_sql(path: Path, record: ApiKey) -> None:
    """The key's row as an ``INSERT`` for Cloudflare D1 (``wrangler d1 execute --file``)."""
    row = (record.key_id, record.tenant, record.key_hash, record.created_at)
    path.write_text(render_statement(KEY_INSERT, row) + ";\n", encoding="utf-8")
    print(
        f"its D1 row is in {path}: npx wrangler d1 execute KNOWLEDGE_DB --env production "
        f"--remote --file {path}",
        file=sys.stderr,
    )
