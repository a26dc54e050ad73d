"""Workers KV binding as the :class:`~router.ports.KeyValueStore` port.

Why an optional TTL: the active version lives forever, but query-cache entries are keyed by
version and day, so once a version is replaced or the day ends they are dead weight; giving the
cache its own adapter with ``expiration_ttl_s`` lets KV delete them. KV refuses TTLs under 60 s,
so shorter ones are raised to 60.
"""

from __future__ import annotations

from typing import Any

from router.adapters.cloudflare.jsconv import to_js, to_py
from router.errors import BindingError

__all__ = ["MIN_EXPIRATION_TTL_S", "WorkersKV"]

MIN_EXPIRATION_TTL_S = 60


class WorkersKV:
    """``get`` → text or None; ``put`` text, with ``expirationTtl`` when a TTL is set."""

    def __init__(self, binding: Any, expiration_ttl_s: int | None = None) -> None:
        self.binding = binding
        self.expiration_ttl_s = expiration_ttl_s

    def with_ttl(self, expiration_ttl_s: int | None) -> WorkersKV:
        """The same namespace, writing with another TTL (e.g. for the query cache)."""
        return WorkersKV(self.binding, expiration_ttl_s)

    async def get(self, key: str) -> str | None:
        try:
            value = to_py(await self.binding.get(key))
        except Exception as exc:
            raise BindingError(f"KV get {key!r} failed: {exc}") from exc
        if value is None:
            return None
        if not isinstance(value, str):
            raise BindingError(f"KV get {key!r} returned {type(value).__name__}, not text")
        return value

    async def put(self, key: str, value: str) -> None:
        try:
            if self.expiration_ttl_s is None:
                await self.binding.put(key, value)
            else:
                ttl = max(MIN_EXPIRATION_TTL_S, int(self.expiration_ttl_s))
                await self.binding.put(key, value, to_js({"expirationTtl": ttl}))
        except Exception as exc:
            raise BindingError(f"KV put {key!r} failed: {exc}") from exc
