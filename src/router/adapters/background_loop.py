"""An event loop of its own on a daemon thread, so synchronous code can drive an async client.

Why: the build's :class:`~router.compile.embedding.PassageEncoder` is synchronous (the vector
cache calls ``encode`` once per batch, from ``kr build``'s event loop or from no loop at all),
while the Cloudflare API client is async httpx, and an httpx client belongs to the loop it was
first used in. One private loop, alive as long as its owner, runs every call of that client:
synchronous callers wait for the result, async callers await it without blocking their loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["BackgroundLoop"]

T = TypeVar("T")


class BackgroundLoop:
    """A loop running forever on a daemon thread until :meth:`close`."""

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and wait for its result (blocks the calling thread)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    async def run_async(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop; the caller's own loop keeps serving meanwhile."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return await asyncio.wrap_future(future)

    @property
    def closed(self) -> bool:
        return self._loop.is_closed()

    def close(self) -> None:
        """Stop the loop and its thread (idempotent)."""
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
