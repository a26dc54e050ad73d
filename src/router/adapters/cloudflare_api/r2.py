"""R2 objects through the REST API, as the :class:`~router.ports.BlobStore` port.

Why the REST object endpoint (``/r2/buckets/{bucket}/objects/{key}``, the one wrangler uses)
rather than the S3 API: it takes the same API token as KV, D1 and Vectorize, so a publish needs
one credential. A PUT answers the JSON envelope; a GET answers the object's bytes, 404 if absent.
Keys keep their ``/`` (``packages/<version>/<name>``); other special characters are quoted.

Listing is ``GET /r2/buckets/{bucket}/objects?prefix=&per_page=&cursor=`` (``result``: objects
with ``key`` and ``size``; ``result_info.cursor`` and ``is_truncated`` page on), and deleting
one object is ``DELETE …/objects/{key}``. The REST API has no HEAD of an object, so
:meth:`R2ObjectStore.size` lists one key with the object's own key as prefix: the object itself
sorts first among the keys it prefixes, and no bytes travel.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from router.adapters.cloudflare_api.client import CloudflareAPI

__all__ = ["LIST_PAGE", "R2ObjectStore"]

LIST_PAGE = 1000
"""Keys per listing request (R2's maximum)."""


class R2ObjectStore:
    """One R2 bucket of the account."""

    def __init__(self, api: CloudflareAPI, bucket: str) -> None:
        self.api = api
        self.bucket = bucket

    def _path(self, key: str) -> str:
        return f"/r2/buckets/{quote(self.bucket, safe='')}/objects/{quote(key, safe='/')}"

    async def put(self, key: str, data: bytes) -> None:
        await self.api.call(
            "PUT",
            self._path(key),
            what=f"R2 put {self.bucket}/{key}",
            content=data,
            headers={"Content-Type": "application/octet-stream"},
        )

    async def get(self, key: str) -> bytes | None:
        response = await self.api.send(
            "GET", self._path(key), what=f"R2 get {self.bucket}/{key}", not_found_ok=True
        )
        return None if response is None else response.content

    async def size(self, key: str) -> int | None:
        """The object's size, or None (:class:`~router.ports.BlobPresence`)."""
        objects, _ = await self._list_page(key, None, 1)
        found = [o for o in objects if o.get("key") == key]
        return int(found[0].get("size", 0)) if found else None

    async def list_keys(self, prefix: str) -> list[str]:
        """Every key under ``prefix``, sorted (:class:`~router.ports.BlobListing`)."""
        keys: list[str] = []
        cursor: str | None = None
        while True:
            objects, cursor = await self._list_page(prefix, cursor, LIST_PAGE)
            keys += [str(o["key"]) for o in objects if "key" in o]
            if not cursor:
                return sorted(keys)

    async def delete(self, key: str) -> None:
        await self.api.send(
            "DELETE", self._path(key), what=f"R2 delete {self.bucket}/{key}", not_found_ok=True
        )

    async def _list_page(
        self, prefix: str, cursor: str | None, per_page: int
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page of the listing, and the cursor of the next one (None at the end)."""
        params = {"prefix": prefix, "per_page": str(per_page)}
        if cursor:
            params["cursor"] = cursor
        what = f"R2 list {self.bucket}/{prefix}"
        path = f"/r2/buckets/{quote(self.bucket, safe='')}/objects"
        response = await self.api.send("GET", path, what=what, params=params)
        assert response is not None  # not_found_ok is off: a 404 raised
        result = self.api.result(response, what, f"GET {path}") or []  # checks the envelope
        objects = result.get("objects", []) if isinstance(result, dict) else result
        info = response.json().get("result_info") or {}
        cursor = info.get("cursor") if info.get("is_truncated") and per_page > 1 else None
        return [o for o in objects if isinstance(o, dict)], cursor or None
