"""The request body limit, enforced before anything parses the body (413 as a JSON error).

Why a middleware and not the model: pydantic's bounds apply after the whole body has been read
and parsed as JSON, which is where a 50 MB body costs its memory; here a declared
``Content-Length`` over the limit is refused at once, and a body without one (chunked) is
counted as it streams in and refused as soon as it passes the limit.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["MAX_BODY_BYTES", "BodyLimitMiddleware", "error_response"]

MAX_BODY_BYTES = 64 * 1024


async def error_response(send: Send, status: int, code: str, message: str) -> None:
    """Send ``{"error": {"code", "message"}}`` straight from ASGI (outside FastAPI)."""
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BodyLimitMiddleware:
    """Reads at most ``max_bytes`` of a request body, then hands it on; more is a 413."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._too_large(send)
            return
        chunks = await self._read(receive)
        if chunks is None:
            await self._too_large(send)
            return
        await self.app(scope, _replay(chunks, receive), send)

    async def _read(self, receive: Receive) -> list[Message] | None:
        """The body's messages, or None once they pass the limit (nothing more is read)."""
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                return messages
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                return None
            if not message.get("more_body", False):
                return messages

    async def _too_large(self, send: Send) -> None:
        message = f"the request body is limited to {self.max_bytes} bytes"
        await error_response(send, 413, "payload_too_large", message)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A ``receive`` that gives the buffered messages first, then the real one (disconnects)."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
