"""R2 bucket binding as the :class:`~router.ports.BlobStore` port.

Why so little: package artifacts are immutable and content-hashed; integrity is checked where
they are decoded (:func:`router.package.reader.load_package` verifies every artifact against the
manifest's sha256), so a corrupt or truncated R2 object is refused there and the service keeps
serving the version it holds. A failing R2 call raises :class:`~router.errors.BindingError`,
which the service treats the same way while a new version is being loaded.
"""

from __future__ import annotations

from typing import Any

from router.adapters.cloudflare.jsconv import is_null, to_bytes, to_js
from router.errors import BindingError

__all__ = ["R2BlobStore"]


class R2BlobStore:
    """``get`` → bytes or None (``await object.arrayBuffer()``); ``put`` bytes as a Uint8Array."""

    def __init__(self, binding: Any) -> None:
        self.binding = binding

    async def get(self, key: str) -> bytes | None:
        try:
            found = await self.binding.get(key)
            if is_null(found):
                return None
            return to_bytes(await found.arrayBuffer())
        except Exception as exc:
            raise BindingError(f"R2 get {key!r} failed: {exc}") from exc

    async def put(self, key: str, data: bytes) -> None:
        try:
            await self.binding.put(key, to_js(bytes(data)))
        except Exception as exc:
            raise BindingError(f"R2 put {key!r} failed: {exc}") from exc
