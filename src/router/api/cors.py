"""CORS: which browser origins may call the API, configured, and read per request in the Worker.

Why no cross-origin access by default: the origin of the browser app is known when it is
deployed, and every origin left out is one fewer page that can spend the API on its visitors'
behalf. ``*`` may be configured for public, anonymous use, and then never with credentials;
credentials (``Access-Control-Allow-Credentials``) are only sent for explicit origins.
Why per request: the Worker's app is built at import (snapshot) and its settings arrive with
``env`` on each request, so the middleware asks for the policy of each request and keeps one
Starlette ``CORSMiddleware`` per distinct policy.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from router.errors import ConfigError

__all__ = ["NO_CORS", "CorsMiddleware", "CorsPolicy", "cors_policy_from"]

_ORIGIN = re.compile(r"^https?://[A-Za-z0-9.-]+(:\d{1,5})?$")
PolicySource = Callable[[Scope], "CorsPolicy"]


@dataclass(frozen=True)
class CorsPolicy:
    """The origins allowed to read responses: none, ``("*",)``, or explicit origins."""

    origins: tuple[str, ...] = ()
    max_age_s: int = 600

    def __post_init__(self) -> None:
        if "*" in self.origins and len(self.origins) > 1:
            raise ConfigError("CORS: '*' cannot be combined with explicit origins")
        for origin in self.origins:
            if origin != "*" and not _ORIGIN.match(origin):
                raise ConfigError(f"CORS: not an origin (scheme://host[:port]): {origin!r}")

    @property
    def any_origin(self) -> bool:
        return self.origins == ("*",)

    def options(self) -> dict[str, Any]:
        """Starlette ``CORSMiddleware`` arguments: credentials only for explicit origins."""
        return {
            "allow_origins": list(self.origins),
            "allow_credentials": not self.any_origin,
            "allow_methods": ["GET", "POST"],
            "allow_headers": ["Authorization", "Content-Type"],
            "expose_headers": ["WWW-Authenticate"],
            "max_age": self.max_age_s,
        }


NO_CORS = CorsPolicy()


def cors_policy_from(raw: str | None) -> CorsPolicy:
    """``KR_CORS_ORIGINS`` / ``--cors-origin``: comma-separated origins, or ``*``."""
    if raw is None:
        return NO_CORS
    return CorsPolicy(tuple(o.strip().rstrip("/") for o in raw.split(",") if o.strip()))


class CorsMiddleware:
    """CORS with the policy of each request (a fixed one for ``kr serve``)."""

    def __init__(self, app: ASGIApp, policy: CorsPolicy | PolicySource = NO_CORS) -> None:
        self.app = app
        self.policy = policy
        self._by_policy: dict[CorsPolicy, ASGIApp] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = self.policy(scope) if callable(self.policy) else self.policy
        await self._app_for(policy)(scope, receive, send)

    def _app_for(self, policy: CorsPolicy) -> ASGIApp:
        if not policy.origins:
            return self.app  # no CORS headers: browsers keep other origins out
        wrapped = self._by_policy.get(policy)
        if wrapped is None:
            wrapped = CORSMiddleware(self.app, **policy.options())
            self._by_policy[policy] = wrapped
        return wrapped
