"""API keys: their format, generation, hashing and the store port the authenticator reads.

Why hashed and not encrypted: the router only has to recognise a key, never show it again, so
D1 holds the sha256 of each key. A key carries 256 random bits, so a plain (unsalted, fast)
hash is as strong as a password hash would be for it, and a leaked table yields no usable key.
The key's public id (``kr_<id>_<secret>``) finds its row in one indexed read; the hash is
then compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Protocol

from router.errors import ConfigError
from router.knowledge.tenants import TENANT_ID_RULE, is_tenant_id

__all__ = [
    "KEY_FIND",
    "KEY_INSERT",
    "KEY_LIST",
    "KEY_PREFIX",
    "KEY_REVOKE",
    "ApiKey",
    "KeyStore",
    "check_tenant",
    "hash_key",
    "key_id_of",
    "key_matches",
    "new_key",
]

KEY_PREFIX = "kr_"
ID_HEX_CHARS = 12  # 48 bits: unique enough to find a row, useless without the secret
SECRET_BYTES = 32  # 256 random bits
_KEY_PATTERN = re.compile(r"^kr_([0-9a-f]{12})_[A-Za-z0-9_-]{43}$")  # ID_HEX_CHARS, SECRET_BYTES

KEY_INSERT = "INSERT INTO api_keys (key_id, tenant, key_hash, created_at) VALUES (?, ?, ?, ?)"
KEY_FIND = "SELECT key_id, tenant, key_hash, created_at, revoked_at FROM api_keys WHERE key_id = ?"
KEY_LIST = (
    "SELECT key_id, tenant, key_hash, created_at, revoked_at FROM api_keys ORDER BY created_at"
)
KEY_REVOKE = "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL"


@dataclass(frozen=True)
class ApiKey:
    """One stored key: never the key itself, only its id, tenant and hash."""

    key_id: str
    tenant: str
    key_hash: str
    created_at: str
    revoked_at: str | None = None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None


class KeyStore(Protocol):
    """Where the authenticator finds a key's row (D1, or its local SQLite stand-in)."""

    async def find(self, key_id: str) -> ApiKey | None: ...


def check_tenant(tenant: str) -> str:
    """The tenant, if it is a tenant id (``router.knowledge.tenants``: the grammar the build
    checks, so a key can name every partition a build can make, and no other)."""
    if not is_tenant_id(tenant):
        raise ConfigError(f"not a valid tenant id: {tenant!r} ({TENANT_ID_RULE})")
    return tenant


def hash_key(presented: str) -> str:
    return hashlib.sha256(presented.encode("utf-8")).hexdigest()


def new_key(tenant: str, created_at: str) -> tuple[str, ApiKey]:
    """A fresh key for ``tenant``: the plaintext (shown once) and the row to store."""
    key_id = secrets.token_hex(ID_HEX_CHARS // 2)
    plaintext = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(SECRET_BYTES)}"
    return plaintext, ApiKey(key_id, check_tenant(tenant), hash_key(plaintext), created_at)


def key_id_of(presented: str) -> str | None:
    """The public id of a well-formed key, None for anything else."""
    match = _KEY_PATTERN.match(presented)
    return match[1] if match else None


def key_matches(record: ApiKey, presented: str) -> bool:
    """The presented key hashes to the stored hash (compared in constant time)."""
    return hmac.compare_digest(record.key_hash, hash_key(presented))
