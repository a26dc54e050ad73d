"""The HTTP API: ``POST /v1/query``, ``GET /v1/health``, ``GET /v1/metrics``, ``GET /v1/gaps``,
OpenAPI, CORS.

Why one factory: ``kr serve`` (uvicorn) and the Worker (ASGI bridge) serve the same app around a
:class:`KnowledgeService`; every error leaves as ``{"error": {"code", "message"}}``, and the
OpenAPI document says so. The tenant a query is served as comes from its credential
(:mod:`router.auth`), never from the body alone; the body is bounded before it is parsed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from fastapi import BackgroundTasks, FastAPI, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.security import HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from router import __version__
from router.api.cors import NO_CORS, CorsMiddleware, CorsPolicy, PolicySource
from router.api.fair_share import CallerShares, RateLimitedError
from router.api.gaps import add_gaps_route
from router.api.limits import MAX_BODY_BYTES, BodyLimitMiddleware
from router.api.pages import add_page_routes
from router.auth import (
    AuthConfig,
    AuthenticationError,
    Authenticator,
    KeyStoreUnavailableError,
    Principal,
    tenant_for,
)
from router.contract import ErrorResponse, QueryRequest, QueryResponse
from router.deferral import Defer
from router.errors import RouterError
from router.service import KnowledgeService

__all__ = ["ERROR_RESPONSES", "create_app", "openapi_document"]

ServiceFactory = Callable[[Request], KnowledgeService]
AuthFactory = Callable[[Request], Authenticator]
SharesFactory = Callable[[Request], CallerShares | None]

_bearer = HTTPBearer(
    auto_error=False,
    description="An API key (`kr keys create`) or a JWT naming the tenant; none: shared "
    "knowledge only, where anonymous access is on.",
)


def _documented(text: str) -> dict[str, Any]:
    return {"model": ErrorResponse, "description": text}


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: _documented(
        "The body is not JSON the parser accepts (`http_error`: invalid UTF-8, nesting too "
        "deep, an integer too long)"
    ),
    401: _documented("No credential where one is needed, or a bad one"),
    403: _documented("The body names a tenant other than the credential's"),
    405: _documented("A method the path does not serve (see Allow)"),
    413: _documented(f"The body is over {MAX_BODY_BYTES} bytes"),
    422: _documented("The body does not match the schema"),
    429: _documented("The caller used its share of serving time (see Retry-After)"),
    503: _documented(
        "No knowledge version can be served, or the key store cannot check the key (see "
        "Retry-After)"
    ),
}
"""The error statuses of ``/v1/query`` as OpenAPI shows them (instead of ``{detail: [...]}``)."""


def openapi_document(app: FastAPI, anonymous: bool) -> dict[str, Any]:
    """The app's OpenAPI document as a caller of this server finds it: where anonymous access
    is on, a credential is optional (``security`` also lists ``{}``), so a request without one
    that is answered 200 is what the document says, not an ignored authentication."""
    document = get_openapi(title=app.title, version=app.version, routes=app.routes)
    if anonymous:
        for operations in document.get("paths", {}).values():
            for operation in operations.values():
                if operation.get("security"):
                    operation["security"] = [*operation["security"], {}]
    return document


async def _run(work: Awaitable[None]) -> None:
    await work


def _error(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    content = {"error": {"code": code, "message": message}}
    return JSONResponse(status_code=status, content=content, headers=headers)


def create_app(
    service: KnowledgeService | ServiceFactory,
    cors: CorsPolicy | PolicySource = NO_CORS,
    defer: Defer | None = None,
    auth: Authenticator | AuthFactory | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    shares: CallerShares | SharesFactory | None = None,
    client_ip_header: str | None = None,
    pages: Path | None = None,
    eval_report: Path | None = None,
) -> FastAPI:
    """Build the app; ``service`` and ``auth`` are ready objects or factories of the request.

    ``auth`` None means anonymous callers only (no key store, no JWT): shared knowledge.
    ``cors`` is a policy or a function of the ASGI scope (the Worker reads it from ``env``).
    ``defer`` schedules post-response work (KV cache copy, query-log batch). By default it is
    Starlette's background tasks, which run after the body is sent under uvicorn; the Workers
    ASGI bridge awaits them before returning a buffered response, so the Worker passes
    ``ctx.waitUntil`` instead (src/entry.py). ``shares`` bounds each caller's share of serving
    time (:mod:`router.api.fair_share`; None: unbounded; or a function of the request, as the
    Worker reads it from ``env``); an anonymous caller is known by its
    address: ``client_ip_header`` where a proxy the caller cannot bypass sets one
    (``cf-connecting-ip``), else the connection's peer.
    ``pages`` is the playground's folder (``router.api.pages.PLAYGROUND_DIR``) for a server that
    serves it (``kr serve``; the Worker's static assets serve it before the app), and
    ``eval_report`` the ``kr eval`` report it shows at ``/eval/report.json``, to the operator
    only (the admin token, ``AuthConfig.admin_token``: it names every tenant's golden queries).
    """
    # /openapi.json and /docs are this app's own routes: the document depends on the caller's
    # server's anonymous setting (a function of the request in the Worker)
    app = FastAPI(title="Knowledge Router", version=__version__, openapi_url=None, redoc_url=None)
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)
    app.add_middleware(CorsMiddleware, policy=cors)  # outermost: errors get CORS headers too
    anonymous = Authenticator(AuthConfig(allow_anonymous=True))

    def resolve(request: Request) -> KnowledgeService:
        return service(request) if callable(service) else service

    def authenticator(request: Request) -> Authenticator:
        if auth is None:
            return anonymous
        return auth if isinstance(auth, Authenticator) else auth(request)

    def caller(request: Request, principal: Principal) -> str:
        if principal.kind != "anonymous":
            return f"{principal.kind}:{principal.tenant}:{principal.subject}"
        address = request.headers.get(client_ip_header) if client_ip_header else None
        if not address and request.client is not None:
            address = request.client.host
        return f"address:{address or 'unknown'}"

    def share_of(request: Request) -> CallerShares | None:
        return shares(request) if callable(shares) else shares

    _add_error_handlers(app)
    _add_routes(app, resolve, authenticator, defer, share_of, caller)
    add_gaps_route(app, resolve, authenticator)
    _add_openapi_routes(app, authenticator)
    if pages is not None:

        async def admin_only(request: Request) -> None:
            authenticator(request).require_admin(request.headers.get("authorization"))

        add_page_routes(app, pages, eval_report, admin_only)
    return app


def _add_openapi_routes(app: FastAPI, authenticator: AuthFactory) -> None:
    """``GET /openapi.json`` (:func:`openapi_document` for the server's anonymous setting, built
    once per setting) and ``GET /docs`` (Swagger UI over it)."""
    documents: dict[bool, dict[str, Any]] = {}

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi(request: Request) -> JSONResponse:
        anonymous = authenticator(request).config.allow_anonymous
        if anonymous not in documents:
            documents[anonymous] = openapi_document(app, anonymous)
        return JSONResponse(documents[anonymous])

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title=f"{app.title} - Swagger UI")


def _add_error_handlers(app: FastAPI) -> None:
    """Every error leaves as ``{"error": {"code", "message"}}``, with the status of its class."""

    @app.exception_handler(AuthenticationError)
    async def unauthenticated(_: Request, exc: AuthenticationError) -> JSONResponse:
        challenge = 'Bearer realm="knowledge-router"'
        if exc.code != "credentials_required":
            challenge += ', error="invalid_token"'
        return _error(401, exc.code, exc.message, {"WWW-Authenticate": challenge})

    @app.exception_handler(RouterError)
    async def router_error(_: Request, exc: RouterError) -> JSONResponse:
        status = exc.http_status if exc.http_status >= 400 else 500
        headers = None
        if isinstance(exc, RateLimitedError | KeyStoreUnavailableError):
            headers = {"Retry-After": str(max(1, math.ceil(exc.retry_after_s)))}
        return _error(status, exc.code, exc.message, headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()) if p != 'body') or 'body'}: {e.get('msg')}"
            for e in exc.errors()
        )
        return _error(422, "invalid_request", problems or "invalid request")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return _error(exc.status_code, code, str(exc.detail), dict(exc.headers or {}))

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        return _error(500, "internal_error", f"{type(exc).__name__}")


def _add_routes(
    app: FastAPI,
    resolve: ServiceFactory,
    authenticator: AuthFactory,
    defer: Defer | None,
    share_of: SharesFactory,
    caller: Callable[[Request, Principal], str],
) -> None:
    """``POST /v1/query``, ``GET /v1/health`` and ``GET /v1/metrics``."""

    @app.post(
        "/v1/query",
        response_model=QueryResponse,
        responses=ERROR_RESPONSES,
        dependencies=[Security(_bearer)],
    )
    async def query(
        body: QueryRequest, request: Request, after_response: BackgroundTasks
    ) -> QueryResponse:
        principal = await authenticator(request).authenticate(request.headers.get("authorization"))
        served = body.model_copy(update={"tenant": tenant_for(principal, body.tenant)})
        # KV cache copy and query-log batch run after the answer is sent (waitUntil in Workers).
        service = resolve(request)
        later = defer or (lambda work: after_response.add_task(_run, work))
        shares = share_of(request)
        who = caller(request, principal)  # logged as a hash only (reformulations, router.ops.gaps)
        if shares is None:
            return await service.query(served, defer=later, caller=who)
        await shares.admit(who)
        started = time.perf_counter()
        try:
            return await service.query(served, defer=later, caller=who)
        finally:
            shares.settle(who, (time.perf_counter() - started) * 1000)

    @app.get("/v1/health", responses={405: ERROR_RESPONSES[405], 503: ERROR_RESPONSES[503]})
    async def health(request: Request) -> JSONResponse:
        svc = resolve(request)
        try:
            package = await svc.package()
        except RouterError as exc:
            return _error(503, exc.code, exc.message)
        state = svc.health()
        return JSONResponse(
            {
                # degraded: another version serves than KV names active (refused), or KV fails
                "status": state["status"],
                "knowledge_version": package.version,
                "active_version": state["active_version"],
                "documents": package.document_count,
                "sections": package.section_count,
                "last_load_error": state["last_load_error"],
                "embedding_model": package.embedding_model,
            }
        )

    @app.get(
        "/v1/metrics",
        responses={status: ERROR_RESPONSES[status] for status in (401, 405, 503)},
        dependencies=[Security(_bearer)],
    )
    async def metrics(request: Request) -> JSONResponse:
        """Counters and rates of this process (PRD §40); a credential where anonymous is off."""
        await authenticator(request).authenticate(request.headers.get("authorization"))
        return JSONResponse(resolve(request).metrics.snapshot())
