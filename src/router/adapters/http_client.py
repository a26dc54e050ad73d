"""An httpx client an adapter owns unless one is injected (tests inject one on a fake server).

Why shared: the Cloudflare API client and the OpenAI-compatible generator need the same life
cycle — create the client lazily, inside the running event loop, close it only if they made it,
and work as ``async with`` blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Self

import httpx

__all__ = ["MAX_BODY_IN_ERROR", "OwnedHttpClient"]

MAX_BODY_IN_ERROR = 200
"""Characters of an error response's body quoted in the error raised for it."""


class OwnedHttpClient:
    """Base of adapters that talk HTTP through one (possibly injected) ``httpx.AsyncClient``."""

    def __init__(self, client: httpx.AsyncClient | None, timeout_s: float) -> None:
        self._client = client
        self._owns_client = client is None
        self._timeout_s = timeout_s

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Closes the client if this adapter created it; an injected client is left open."""
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self._timeout_s)
        return self._client

    async def _post_json(
        self,
        url: str | httpx.URL,
        body: Mapping[str, Any],
        headers: Mapping[str, str],
        fail: Callable[[str], Exception],
    ) -> httpx.Response:
        """POST ``body`` as JSON; a timeout, a transport error or a non-2xx status becomes
        ``fail(message)`` (the adapter's own error, its secrets redacted by it)."""
        try:
            response = await self._http().post(
                url, json=dict(body), headers=dict(headers), timeout=self._timeout_s
            )
        except httpx.TimeoutException as exc:
            raise fail(f"timed out after {self._timeout_s:g}s") from exc
        except httpx.HTTPError as exc:
            raise fail(f"request failed ({type(exc).__name__}: {exc})") from exc
        if not response.is_success:
            snippet = response.text[:MAX_BODY_IN_ERROR]
            raise fail(f"HTTP {response.status_code}: {snippet}")
        return response
