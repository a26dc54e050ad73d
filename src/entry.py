"""Cloudflare Python Worker entry point (thin): serves the router's HTTP app.

Nothing heavy happens at import time: the app and the knowledge package are created on the first
request and kept for the isolate's life. Bindings (KV ``KNOWLEDGE_KV``, R2 ``KNOWLEDGE_BUCKET``)
reach the service through ``env``; their adapters (and D1, Vectorize, AI) arrive with the Worker
issue — until then this file documents the shape and is exercised by ``wrangler deploy --dry-run``.
"""

from __future__ import annotations

from typing import Any

from workers import WorkerEntrypoint  # type: ignore[import-not-found]

_app: Any = None


def _get_app() -> Any:
    global _app
    if _app is None:
        from router.adapters.cloudflare import service_from_env  # type: ignore[import-not-found]

        from router.api.app import create_app

        _app = create_app(lambda request: service_from_env(request.scope["env"]))
    return _app


class Default(WorkerEntrypoint):  # type: ignore[misc]
    async def fetch(self, request: Any) -> Any:
        import asgi  # type: ignore[import-not-found]

        return await asgi.fetch(_get_app(), request, self.env)

    async def scheduled(self, controller: Any, env: Any, ctx: Any) -> None:
        """Cron trigger: cache warming (replays frequent queries) comes with the Worker issue."""
        return None
