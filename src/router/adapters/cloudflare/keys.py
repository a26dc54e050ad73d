"""API keys read from D1 (``KNOWLEDGE_DB``, table ``api_keys`` of migrations/d1/0004).

Why read-only: keys are created and revoked by an operator (``kr keys`` locally, or
``wrangler d1 execute`` with the same statements); the Worker only looks a key up by its id.
"""

from __future__ import annotations

from typing import Any

from router.adapters.cloudflare.jsconv import sql_params, to_py
from router.auth.api_keys import KEY_FIND, ApiKey
from router.errors import BindingError

__all__ = ["D1KeyStore"]


class D1KeyStore:
    """The key store port over the D1 binding."""

    def __init__(self, binding: Any) -> None:
        self.binding = binding

    async def find(self, key_id: str) -> ApiKey | None:
        try:
            result = to_py(await self.binding.prepare(KEY_FIND).bind(*sql_params([key_id])).all())
        except Exception as exc:  # a D1 outage: fail closed (503), never let the caller in
            raise BindingError(f"D1 key lookup failed: {exc}") from exc
        rows = (result or {}).get("results") or []
        if not rows:
            return None
        row = dict(rows[0])
        return ApiKey(
            key_id=str(row["key_id"]),
            tenant=str(row["tenant"]),
            key_hash=str(row["key_hash"]),
            created_at=str(row["created_at"]),
            revoked_at=None if row.get("revoked_at") is None else str(row["revoked_at"]),
        )
