"""A key-value store seen under a key prefix: one store, several caches that never mix.

Why: the query cache's key names the question, its context and the knowledge version, not
the services that answered it. Where a reranker reorders results, the same question has another
answer, so the service keeps those answers under a prefix naming the reranker (``rr:<model>:``):
turning a reranker on or off never serves an answer the other setting computed.
"""

from __future__ import annotations

from router.ports import KeyValueStore

__all__ = ["NamespacedStore", "reranker_namespace"]


def reranker_namespace(model: str) -> str:
    return f"rr:{model}:"


class NamespacedStore:
    """``store`` with every key read or written as ``prefix + key``."""

    def __init__(self, store: KeyValueStore, prefix: str) -> None:
        self.store = store
        self.prefix = prefix

    async def get(self, key: str) -> str | None:
        return await self.store.get(self.prefix + key)

    async def put(self, key: str, value: str) -> None:
        await self.store.put(self.prefix + key, value)
