"""``GET /v1/gaps``: the content-gaps report (:mod:`router.ops.gaps`) over HTTP.

Who sees what: the admin token (``KR_ADMIN_TOKEN``) sees every tenant's questions and the
anonymous ones (``?tenant=T`` narrows to one); a tenant's credential (API key or JWT) sees its
own tenant's questions only (``?tenant=`` naming another is a 403); no credential is a 401,
whether anonymous access is on or off — a question log is never public. Served by ``kr serve``
and the Worker alike (the same app); the playground's ``/gaps`` page reads it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from router.auth import Authenticator, CredentialsRequiredError, tenant_for
from router.errors import BindingError, InvalidRequestError
from router.ops.gaps import gap_report
from router.ops.questions import ALL_TENANTS, parse_when
from router.service import KnowledgeService

__all__ = ["DEFAULT_GROUPS", "GAPS_PATH", "MAX_GROUPS", "add_gaps_route"]

GAPS_PATH = "/v1/gaps"
DEFAULT_GROUPS = 50
MAX_GROUPS = 500


def add_gaps_route(
    app: FastAPI,
    resolve: Callable[[Request], KnowledgeService],
    authenticator: Callable[[Request], Authenticator],
) -> None:
    """``GET /v1/gaps?since=&until=&tenant=&limit=`` (outside the OpenAPI document, like the
    operator's eval report: its credential rule is not the query API's)."""

    @app.get(GAPS_PATH, include_in_schema=False)
    async def gaps(request: Request) -> JSONResponse:
        scope = await _scope(request, authenticator(request))
        params = request.query_params
        now = time.time()
        since = _moment(params.get("since"), now, "since")
        until = _moment(params.get("until"), now, "until")
        limit = _limit(params.get("limit"))
        service = resolve(request)
        log = service.question_log
        if log is None:
            raise BindingError("this server keeps no question log (no D1 binding)")
        if service.recorder is not None:  # this isolate's pending questions count too
            await service.recorder.flush()
        report = await gap_report(log, since, until, scope, now=now)
        return JSONResponse(report.as_json(limit), headers={"Cache-Control": "no-store"})


async def _scope(request: Request, auth: Authenticator) -> str:
    header = request.headers.get("authorization")
    wanted = request.query_params.get("tenant") or None
    if auth.is_admin(header):
        return wanted or ALL_TENANTS
    principal = await auth.authenticate(header)
    if principal.tenant is None:
        raise CredentialsRequiredError(
            "the content gaps need a tenant's credential, or the admin token for every tenant"
        )
    tenant = tenant_for(principal, wanted)
    assert tenant is not None
    return tenant


def _moment(raw: str | None, now: float, name: str) -> float | None:
    if raw is None or not raw.strip():
        return None
    try:
        return parse_when(raw, now)
    except ValueError as exc:
        raise InvalidRequestError(
            f"{name}: expected YYYY-MM-DD, an ISO timestamp, unix seconds or a span like 7d"
        ) from exc


def _limit(raw: str | None) -> int:
    if raw is None or not raw.strip():
        return DEFAULT_GROUPS
    if not raw.strip().isdigit() or not 1 <= int(raw) <= MAX_GROUPS:
        raise InvalidRequestError(f"limit: a whole number from 1 to {MAX_GROUPS}")
    return int(raw)
