"""Cloudflare Python Worker entry point (thin): the router's HTTP app and its cache warming.

Everything a request needs is imported and built here, at module level: a Python Worker runs
its top-level scope once when it is deployed and restores every new isolate from a snapshot of
that memory, so what is done here costs a cold isolate nothing, while what a request creates
lazily is paid again by every new isolate (docs/adr/0007). That is FastAPI, pydantic and the
router, the app itself, and the default language's stemmer (its module is compiled on import).
Nothing here reads a binding or the clock, or draws a random number (the snapshot would freeze
them): bindings (``KNOWLEDGE_KV``, ``KNOWLEDGE_BUCKET``, ``KNOWLEDGE_DB``, ``KNOWLEDGE_VECTORS``,
``AI``) reach the service only through ``env`` at request time (:mod:`router.adapters.cloudflare`),
and the knowledge package is read from R2 on the first query.

- ``fetch``: the FastAPI app through the Workers ASGI bridge; handlers find ``env`` in
  ``request.scope["env"]``, and so do the credential checks and the CORS policy (anonymous
  access is off unless ``KR_ALLOW_ANONYMOUS=on``; docs/adr/0012).
- ``scheduled`` (cron): deletes the logged queries and questions older than
  ``KR_LOG_RETENTION_DAYS``, writes the isolate's pending query counts and replays the most
  frequent recent queries against the active version, so the KV query cache holds their answers.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from workers import WorkerEntrypoint, wait_until  # type: ignore[import-not-found]

from router.adapters.cloudflare import service_from_env, warm_from_env
from router.adapters.cloudflare.service import (
    authenticator_from_env,
    cors_from_env,
    retention_from_env,
    shares_from_env,
)
from router.analysis.analyzer import AnalyzerConfig, snowball_stem_function
from router.api.app import create_app


def _after_response(work: Any) -> None:
    """KV cache copy, query-log batch and the colo cache's puts after the response:
    ``ctx.waitUntil`` keeps the isolate alive for them (the ASGI bridge would await background
    tasks before answering)."""
    wait_until(asyncio.ensure_future(work))


app = create_app(
    lambda request: service_from_env(request.scope["env"], _after_response),
    cors=lambda scope: cors_from_env(scope["env"]),
    defer=_after_response,
    auth=lambda request: authenticator_from_env(request.scope["env"]),
    shares=lambda request: shares_from_env(request.scope["env"]),
    client_ip_header="cf-connecting-ip",  # set by Cloudflare, not by the caller
)
snowball_stem_function(AnalyzerConfig().language)  # compiles the stemmer's module into the snapshot


class Default(WorkerEntrypoint):  # type: ignore[misc]
    async def fetch(self, request: Any) -> Any:
        import asgi  # type: ignore[import-not-found]

        return await asgi.fetch(app, request, self.env)

    async def scheduled(self, controller: Any, env: Any = None, ctx: Any = None) -> None:
        """Cron trigger: log retention, then cache warming; the reports go to the Worker's logs."""
        scheduled_ms = getattr(controller, "scheduledTime", None)
        now = float(scheduled_ms) / 1000 if isinstance(scheduled_ms, int | float) else None
        env = env if env is not None else self.env
        retention = await retention_from_env(env, now=now)
        report = await warm_from_env(env, now=now, defer=_after_response)
        print(json.dumps({"log_retention": retention.as_dict(), "cache_warming": report.as_dict()}))
