"""R2 objects through the REST API, as the :class:`~router.ports.BlobStore` port.

Why the REST object endpoint (``/r2/buckets/{bucket}/objects/{key}``, the one wrangler uses)
rather than the S3 API: it takes the same API token as KV, D1 and Vectorize, so a publish needs
one credential. A PUT answers the JSON envelope; a GET answers the object's bytes, 404 if absent.
Keys keep their ``/`` (``packages/<version>/<name>``); other special characters are quoted.
"""

from __future__ import annotations

from urllib.parse import quote

from router.adapters.cloudflare_api.client import CloudflareAPI

__all__ = ["R2ObjectStore"]


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
