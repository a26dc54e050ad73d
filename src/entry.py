"""Cloudflare Python Worker entry point (thin): the router's HTTP app and its cache warming.

Nothing heavy happens at import time: FastAPI, the router and the knowledge package are imported
and created on the first request and kept for the isolate's life. Bindings (``KNOWLEDGE_KV``,
``KNOWLEDGE_BUCKET``, ``KNOWLEDGE_DB``, ``KNOWLEDGE_VECTORS``, ``AI``) reach the service only
through ``env`` (:mod:`router.adapters.cloudflare`).

- ``fetch``: the FastAPI app through the Workers ASGI bridge; handlers find ``env`` in
  ``request.scope["env"]``.
- ``scheduled`` (cron): writes the isolate's pending query counts and replays the most frequent
  recent queries against the active version, so the KV query cache holds their answers.
"""

from __future__ import annotations

import json
from typing import Any

from workers import WorkerEntrypoint  # type: ignore[import-not-found]

_app: Any = None


def _get_app() -> Any:
    """The FastAPI app, created on the first request of the isolate."""
    global _app
    if _app is None:
        from router.adapters.cloudflare import service_from_env
        from router.api.app import create_app

        _app = create_app(
            lambda request: service_from_env(request.scope["env"]), defer=_after_response
        )
    return _app


def _after_response(work: Any) -> None:
    """KV cache copy and query-log batch after the response: ``ctx.waitUntil`` keeps the
    isolate alive for them (the ASGI bridge would await background tasks before answering)."""
    import asyncio

    from workers import wait_until

    wait_until(asyncio.ensure_future(work))


class Default(WorkerEntrypoint):  # type: ignore[misc]
    async def fetch(self, request: Any) -> Any:
        import asgi  # type: ignore[import-not-found]

        return await asgi.fetch(_get_app(), request, self.env)

    async def scheduled(self, controller: Any, env: Any = None, ctx: Any = None) -> None:
        """Cron trigger: cache warming; the report goes to the Worker's logs."""
        from router.adapters.cloudflare import warm_from_env

        scheduled_ms = getattr(controller, "scheduledTime", None)
        now = float(scheduled_ms) / 1000 if isinstance(scheduled_ms, int | float) else None
        report = await warm_from_env(env if env is not None else self.env, now=now)
        print(json.dumps({"cache_warming": report.as_dict()}))
