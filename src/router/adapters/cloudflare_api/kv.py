"""Workers KV values through the REST API, as the :class:`~router.ports.KeyValueStore` port.

Why it matters which write is last: the KV value ``knowledge:active-version`` is the switch the
Worker reads, so publishing writes it once, after everything else (see router.ops.publish). The key
is URL-encoded whole (``:`` included), as the API asks; a PUT body is the value itself, a GET
answers the stored bytes, 404 if the key is absent. KV is eventually consistent: other edge
locations see a new value within about a minute.
"""

from __future__ import annotations

from urllib.parse import quote

from router.adapters.cloudflare_api.client import CloudflareAPI

__all__ = ["KVNamespaceStore"]


class KVNamespaceStore:
    """One KV namespace of the account (by id, not binding name)."""

    def __init__(self, api: CloudflareAPI, namespace_id: str) -> None:
        self.api = api
        self.namespace_id = namespace_id

    def _path(self, key: str) -> str:
        return (
            f"/storage/kv/namespaces/{quote(self.namespace_id, safe='')}"
            f"/values/{quote(key, safe='')}"
        )

    async def put(self, key: str, value: str) -> None:
        await self.api.call(
            "PUT",
            self._path(key),
            what=f"KV put {key}",
            content=value.encode("utf-8"),
            headers={"Content-Type": "text/plain; charset=utf-8"},
        )

    async def get(self, key: str) -> str | None:
        response = await self.api.send(
            "GET", self._path(key), what=f"KV get {key}", not_found_ok=True
        )
        return None if response is None else response.content.decode("utf-8")
