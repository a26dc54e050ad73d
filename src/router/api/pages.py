"""The playground's pages (``/``, ``/eval`` and their scripts) and the last eval report.

Why static files in one folder: the page is a plain browser app over the public API, so it
needs no server code of its own. ``kr serve`` serves the folder with these routes; the Worker
serves the same folder as Workers static assets (``[assets]`` in ``wrangler.toml``), before its
Python runs, so a page view costs the Worker nothing (docs/adr/0019). The folder's ``_headers``
gives Cloudflare the headers :data:`PAGE_HEADERS` gives here.

Why the report has its own route: it is a file ``kr eval`` rewrites (``reports/golden``), read on
each request so a new run shows without a restart, and it names every tenant's golden queries and
expected (private) section ids, so it is the operator's alone: it needs the admin token
(``KR_ADMIN_TOKEN``) whether anonymous access is on or off — no tenant's key opens it, and
without an admin token it is off (403) — and it is never published as a public asset.
"""

from __future__ import annotations

import json
import mimetypes
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

__all__ = [
    "EVAL_REPORT_PATH",
    "PAGE_HEADERS",
    "PLAYGROUND_DIR",
    "PageFile",
    "add_page_routes",
    "page_files",
]

PLAYGROUND_DIR = Path(__file__).with_name("playground")
"""The playground's static files (HTML, CSS, JS): what both servers serve at ``/``."""

EVAL_REPORT_PATH = "/eval/report.json"

PAGE_HEADERS: dict[str, str] = {
    # The page takes an API key: no script, style or connection from elsewhere, no framing.
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
"""Headers of every page file; ``playground/_headers`` says the same to Workers static assets."""

_PAGES = {"index.html": "/", "eval.html": "/eval", "gaps.html": "/gaps"}
"""HTML files and their paths, as Workers static assets name them (``/eval`` for ``eval.html``)."""

Authorize = Callable[[Request], Awaitable[None]]
"""Raises (401/403) unless the request may read the report: the admin token."""


@dataclass(frozen=True)
class PageFile:
    """One file of the folder, read once: its URL path, bytes and media type."""

    path: str
    body: bytes
    media_type: str


def page_files(folder: Path = PLAYGROUND_DIR) -> list[PageFile]:
    """The folder's servable files: pages at their paths, others at ``/<name>``; names that
    start with ``_`` or ``.`` are configuration for the asset server, not files to serve."""
    files = []
    for item in sorted(folder.iterdir()):
        if not item.is_file() or item.name.startswith(("_", ".")):
            continue
        media_type = mimetypes.guess_type(item.name)[0] or "application/octet-stream"
        if media_type.startswith("text/") or media_type.endswith("javascript"):
            media_type += "; charset=utf-8"
        path = _PAGES.get(item.name, f"/{item.name}")
        files.append(PageFile(path, item.read_bytes(), media_type))
    return files


def add_page_routes(
    app: FastAPI, folder: Path, eval_report: Path | None, authorize: Authorize
) -> None:
    """``GET`` routes for the folder's files (outside the OpenAPI document: they are not API)
    and, when ``eval_report`` is given, ``GET /eval/report.json`` behind ``authorize``."""
    for page in page_files(folder):
        app.add_api_route(page.path, _serve(page), methods=["GET"], include_in_schema=False)
    if eval_report is not None:
        app.add_api_route(
            EVAL_REPORT_PATH,
            _report(eval_report, authorize),
            methods=["GET"],
            include_in_schema=False,
        )


def _serve(page: PageFile) -> Callable[[], Awaitable[Response]]:
    async def serve() -> Response:
        headers = {**PAGE_HEADERS, "Cache-Control": "no-cache"}
        return Response(page.body, media_type=page.media_type, headers=headers)

    return serve


def _report(path: Path, authorize: Authorize) -> Callable[[Request], Awaitable[Response]]:
    async def report(request: Request) -> Response:
        await authorize(request)
        try:
            content = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return _error(404, "no_report", f"no evaluation report at {path}: run `kr eval` first")
        except (OSError, ValueError) as exc:
            # a damaged file is a backend fault: never a 500 (docs/security.md)
            return _error(
                503,
                "bad_report",
                f"the evaluation report at {path} is unreadable ({exc}): rerun `kr eval`",
            )
        return JSONResponse(content, headers={"Cache-Control": "no-cache"})

    return report


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)
