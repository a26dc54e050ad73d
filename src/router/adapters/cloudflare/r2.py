"""R2 bucket binding as the :class:`~router.ports.BlobStore` port.

Why so little: package artifacts are immutable and content-hashed; integrity is checked where
they are decoded (:func:`router.package.reader.load_package` verifies every artifact against the
manifest's sha256), so a corrupt or truncated R2 object is refused there and the service keeps
serving the version it holds. A failing R2 call raises :class:`~router.errors.BindingError`,
which the service treats the same way while a new version is being loaded.
"""

from __future__ import annotations

from typing import Any

from router.adapters.cloudflare.jsconv import copy_into, is_null, to_bytes, to_js
from router.errors import BindingError
from router.ports import Allocate, Blob

__all__ = ["R2BlobStore"]


class R2BlobStore:
    """``get`` → bytes or None (``await object.arrayBuffer()``; ``get_buffer``: the
    ``ArrayBuffer`` itself); ``get_into`` → the same copied
    into a buffer the reader gives; ``put`` bytes as a Uint8Array; ``size`` → ``head(key)``'s
    size (no body); ``list_keys`` → ``list({prefix, cursor})`` pages; ``delete(key)``."""

    def __init__(self, binding: Any) -> None:
        self.binding = binding

    async def get(self, key: str) -> bytes | None:
        found = await self.get_buffer(key)
        return None if found is None else to_bytes(found)

    async def get_buffer(self, key: str) -> Any:
        """The object's body as the binding gives it (a JS ``ArrayBuffer``: not yet copied into
        the wasm heap, so the colo cache can store it as is), or None when it is absent."""
        try:
            found = await self.binding.get(key)
            if is_null(found):
                return None
            return await found.arrayBuffer()
        except Exception as exc:
            raise BindingError(f"R2 get {key!r} failed: {exc}") from exc

    async def get_into(self, key: str, allocate: Allocate) -> Blob | None:
        """The object copied from its ``ArrayBuffer`` into ``allocate(size)`` when that gives
        a buffer (the shard arena: no wasm ``bytes`` allocated for it), else as ``bytes``."""
        try:
            found = await self.binding.get(key)
            if is_null(found):
                return None
            target = allocate(int(found.size))
            body = await found.arrayBuffer()
            if target is None:
                return to_bytes(body)
            copy_into(body, target)
            return target
        except Exception as exc:
            raise BindingError(f"R2 get {key!r} failed: {exc}") from exc

    async def put(self, key: str, data: bytes) -> None:
        try:
            await self.binding.put(key, to_js(bytes(data)))
        except Exception as exc:
            raise BindingError(f"R2 put {key!r} failed: {exc}") from exc

    async def size(self, key: str) -> int | None:
        try:
            found = await self.binding.head(key)
            return None if is_null(found) else int(found.size)
        except Exception as exc:
            raise BindingError(f"R2 head {key!r} failed: {exc}") from exc

    async def list_keys(self, prefix: str) -> list[str]:
        keys: list[str] = []
        cursor: str | None = None
        try:
            while True:
                options: dict[str, Any] = {"prefix": prefix}
                if cursor:
                    options["cursor"] = cursor
                page = await self.binding.list(to_js(options))
                keys += [str(item.key) for item in page.objects]
                cursor = str(page.cursor) if page.truncated else None
                if not cursor:
                    return sorted(keys)
        except Exception as exc:
            raise BindingError(f"R2 list {prefix!r} failed: {exc}") from exc

    async def delete(self, key: str) -> None:
        try:
            await self.binding.delete(key)
        except Exception as exc:
            raise BindingError(f"R2 delete {key!r} failed: {exc}") from exc
