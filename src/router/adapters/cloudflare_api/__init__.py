"""Cloudflare REST API adapters (httpx): R2 objects, KV values, D1 queries, Vectorize upserts,
Workers AI embeddings.

Why a second Cloudflare adapter set beside the Worker bindings (``router.adapters.cloudflare``):
building and publishing run on a developer machine or in CI, outside any Worker, so they reach
the same resources through the REST API with an API token. Each module implements one port.
"""

from router.adapters.cloudflare_api.ai import (
    WorkersAiApiEmbedder,
    WorkersAiEncoder,
    workers_ai_encoder,
)
from router.adapters.cloudflare_api.client import (
    DEFAULT_API_BASE,
    CloudflareAPI,
    CloudflareAPIError,
    RetryPolicy,
)
from router.adapters.cloudflare_api.config import (
    CloudflareAccount,
    CloudflareSettings,
    read_wrangler_bindings,
)
from router.adapters.cloudflare_api.d1 import D1Database, D1RelationalStore
from router.adapters.cloudflare_api.kv import KVNamespaceStore
from router.adapters.cloudflare_api.r2 import R2ObjectStore
from router.adapters.cloudflare_api.vectorize import VectorizeIndex

__all__ = [
    "DEFAULT_API_BASE",
    "CloudflareAPI",
    "CloudflareAPIError",
    "CloudflareAccount",
    "CloudflareSettings",
    "D1Database",
    "D1RelationalStore",
    "KVNamespaceStore",
    "R2ObjectStore",
    "RetryPolicy",
    "VectorizeIndex",
    "WorkersAiApiEmbedder",
    "WorkersAiEncoder",
    "read_wrangler_bindings",
    "workers_ai_encoder",
]
