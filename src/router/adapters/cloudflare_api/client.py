"""A small client of the Cloudflare REST API (``/client/v4``) with httpx: auth, envelope, retries.

Why our own and not the ``cloudflare`` SDK: publishing needs five endpoints, and the behaviour
that matters is ours to decide — which failures are retried (429 and 5xx, with backoff that
honours ``Retry-After``; transport errors only when repeating the request is harmless), and how a
failure reads: every error is a :class:`CloudflareAPIError` (a :class:`~router.errors.RouterError`)
naming the operation, the HTTP status and Cloudflare's own error codes, never the API token.

Cloudflare answers JSON requests with an envelope ``{"success", "errors", "messages", "result"}``;
raw reads (an R2 object, a KV value) answer the bytes themselves, and an envelope on failure.
The base URL is configurable so tests point the client at a fake API on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from router.adapters.http_client import OwnedHttpClient
from router.errors import RouterError

__all__ = [
    "DEFAULT_API_BASE",
    "RETRY_STATUSES",
    "CloudflareAPI",
    "CloudflareAPIError",
    "RetryPolicy",
]

DEFAULT_API_BASE = "https://api.cloudflare.com/client/v4"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
"""Statuses that mean "not now": rate limited or a transient server failure."""

_MAX_BODY_IN_ERROR = 300
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
"""Transport failures that happen before the request reached the server (safe to repeat)."""

Sleep = Callable[[float], Awaitable[None]]


class CloudflareAPIError(RouterError):
    """A Cloudflare API request failed.

    ``status`` is the HTTP status (None when no response came back), ``errors`` Cloudflare's
    ``[{"code", "message"}]``, and ``retryable`` whether trying again later may succeed (429,
    5xx, transport failures) — a 4xx other than 429 is not: the request itself is wrong.
    """

    code = "cloudflare_api_error"
    http_status = 502

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        errors: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.errors = errors or []


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff: ``base_delay_s · 2^attempt``, capped, or the server's Retry-After."""

    attempts: int = 5
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        wait = retry_after if retry_after is not None else self.base_delay_s * 2**attempt
        return max(0.0, min(wait, self.max_delay_s))


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class CloudflareAPI(OwnedHttpClient):
    """One account of the Cloudflare API, authenticated with an API token (``Bearer``).

    Owns (and closes) its httpx client unless one is injected; use ``async with`` or
    :meth:`aclose`. An owned client is created on first use, inside the running event loop.
    """

    def __init__(
        self,
        account_id: str,
        api_token: str,
        base_url: str = DEFAULT_API_BASE,
        *,
        timeout_s: float = 60.0,
        retry: RetryPolicy | None = None,
        client: httpx.AsyncClient | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.account_id = account_id
        self.base_url = base_url.rstrip("/")
        self.retry = retry or RetryPolicy()
        self._token = api_token
        super().__init__(client, timeout_s)
        self._sleep = sleep

    def _redact(self, text: str) -> str:
        return text.replace(self._token, "***") if self._token else text

    async def sleep(self, seconds: float) -> None:
        await self._sleep(seconds)

    async def send(
        self,
        method: str,
        path: str,
        *,
        what: str,
        content: bytes | None = None,
        json_body: Any = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        idempotent: bool = True,
        not_found_ok: bool = False,
    ) -> httpx.Response | None:
        """Send ``method`` to ``/accounts/<account_id><path>`` (``path`` already URL-quoted).

        Retries 429 and 5xx (idempotent requests only, except 429, which Cloudflare answers
        before doing anything) and transport failures (idempotent requests, or failures that
        happened before the request was sent). Returns None for a 404 when ``not_found_ok``.
        """
        url = f"{self.base_url}/accounts/{self.account_id}{path}"
        shown = f"{method} /accounts/{self.account_id}{path}"
        request_headers = {"Authorization": f"Bearer {self._token}", **(headers or {})}
        attempts = max(1, self.retry.attempts)
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                response = await self._http().request(
                    method,
                    url,
                    content=content,
                    json=json_body,
                    params=params,
                    headers=request_headers,
                )
            except httpx.HTTPError as exc:
                error = CloudflareAPIError(
                    self._redact(f"{what}: {shown} failed ({type(exc).__name__}: {exc})"),
                    retryable=True,
                )
                if last or not (idempotent or isinstance(exc, _NOT_SENT)):
                    raise error from exc
                await self._sleep(self.retry.delay(attempt))
                continue
            status = response.status_code
            if status in RETRY_STATUSES and (idempotent or status == 429) and not last:
                await self._sleep(self.retry.delay(attempt, _retry_after(response)))
                continue
            if status == 404 and not_found_ok:
                return None
            if not response.is_success:
                raise self._error(response, what, shown)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    async def call(self, method: str, path: str, *, what: str, **kwargs: Any) -> Any:
        """:meth:`send` and unwrap the JSON envelope: its ``result``, or an error."""
        response = await self.send(method, path, what=what, **kwargs)
        if response is None:
            return None
        return self.result(response, what, f"{method} /accounts/{self.account_id}{path}")

    def result(self, response: httpx.Response, what: str, shown: str) -> Any:
        try:
            payload = response.json()
        except ValueError as exc:
            raise CloudflareAPIError(
                f"{what}: {shown} answered HTTP {response.status_code} with a body that is "
                "not JSON",
                status=response.status_code,
            ) from exc
        if not isinstance(payload, dict) or payload.get("success") is not True:
            raise self._error(response, what, shown, payload)
        return payload.get("result")

    def _error(
        self, response: httpx.Response, what: str, shown: str, payload: Any = None
    ) -> CloudflareAPIError:
        if payload is None:
            try:
                payload = response.json()
            except ValueError:
                payload = None
        errors: list[dict[str, Any]] = []
        if isinstance(payload, dict) and isinstance(payload.get("errors"), list):
            errors = [e for e in payload["errors"] if isinstance(e, dict)]
        if errors:
            detail = "; ".join(f"[{e.get('code')}] {e.get('message')}" for e in errors)
        else:
            detail = response.text[:_MAX_BODY_IN_ERROR] or response.reason_phrase
        status = response.status_code
        hint = ""
        if status in (401, 403):
            hint = " (check CLOUDFLARE_API_TOKEN and its permissions for this account)"
        return CloudflareAPIError(
            self._redact(f"{what}: {shown} answered HTTP {status}: {detail}{hint}"),
            status=status,
            retryable=status in RETRY_STATUSES,
            errors=errors,
        )
