"""The HTTP API: ``POST /v1/query``, ``GET /v1/health``, ``GET /v1/metrics``, OpenAPI, CORS.

Why one factory: ``kr serve`` (uvicorn) and the Worker (ASGI bridge) serve the same app around a
:class:`KnowledgeService`; every error leaves as ``{"error": {"code", "message"}}``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import BackgroundTasks, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from router import __version__
from router.contract import QueryRequest, QueryResponse
from router.deferral import Defer
from router.errors import RouterError
from router.service import KnowledgeService

__all__ = ["create_app"]

ServiceFactory = Callable[[Request], KnowledgeService]


async def _run(work: Awaitable[None]) -> None:
    await work


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": {"code": code, "message": message}})


def create_app(
    service: KnowledgeService | ServiceFactory,
    allowed_origins: list[str] | None = None,
    defer: Defer | None = None,
) -> FastAPI:
    """Build the app; ``service`` is a ready service or a factory taking the request.

    ``defer`` schedules post-response work (KV cache copy, query-log batch). By default it is
    Starlette's background tasks, which run after the body is sent under uvicorn; the Workers
    ASGI bridge awaits them before returning a buffered response, so the Worker passes
    ``ctx.waitUntil`` instead (src/entry.py).
    """
    app = FastAPI(title="Knowledge Router", version=__version__)
    app.add_middleware(
        CORSMiddleware,
        allow_origins=allowed_origins or ["*"],
        allow_methods=["GET", "POST", "OPTIONS"],
        allow_headers=["*"],
        max_age=600,
    )

    def resolve(request: Request) -> KnowledgeService:
        return service(request) if callable(service) else service

    _add_error_handlers(app)
    _add_routes(app, resolve, defer)
    return app


def _add_error_handlers(app: FastAPI) -> None:
    """Every error leaves as ``{"error": {"code", "message"}}``, with the status of its class."""

    @app.exception_handler(RouterError)
    async def router_error(_: Request, exc: RouterError) -> JSONResponse:
        status = exc.http_status if exc.http_status >= 400 else 500
        return _error(status, exc.code, exc.message)

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
        return _error(exc.status_code, code, str(exc.detail))

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        return _error(500, "internal_error", f"{type(exc).__name__}")


def _add_routes(app: FastAPI, resolve: ServiceFactory, defer: Defer | None) -> None:
    """``POST /v1/query``, ``GET /v1/health`` and ``GET /v1/metrics``."""

    @app.post("/v1/query", response_model=QueryResponse)
    async def query(
        body: QueryRequest, request: Request, after_response: BackgroundTasks
    ) -> QueryResponse:
        # KV cache copy and query-log batch run after the answer is sent (waitUntil in Workers).
        service = resolve(request)
        later = defer or (lambda work: after_response.add_task(_run, work))
        return await service.query(body, defer=later)

    @app.get("/v1/health")
    async def health(request: Request) -> JSONResponse:
        svc = resolve(request)
        try:
            package = await svc.package()
        except RouterError as exc:
            return _error(503, exc.code, exc.message)
        return JSONResponse(
            {
                "status": "ok",
                "knowledge_version": package.version,
                "documents": package.document_count,
                "sections": package.section_count,
                "last_load_error": svc.last_load_error,
                "embedding_model": package.embedding_model,
            }
        )

    @app.get("/v1/metrics")
    async def metrics(request: Request) -> JSONResponse:
        """Counters and rates of this process (PRD §40)."""
        return JSONResponse(resolve(request).metrics.snapshot())
