"""Work that may run after the response is sent (KV cache writes, query-log batches).

Why: a KV write or a D1 batch costs tens to hundreds of milliseconds, and nothing in the answer
depends on it. The HTTP layer passes a ``defer`` callback (Starlette background tasks, which the
Workers ASGI bridge runs under ``ctx.waitUntil``); without one the work is awaited in place.
Either way it is best effort: a failure is logged and never fails the query that caused it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

__all__ = ["Defer", "best_effort", "run_or_defer"]

log = logging.getLogger(__name__)

Defer = Callable[[Awaitable[None]], None]
"""Schedules an awaitable to run after the response (e.g. ``BackgroundTasks.add_task``)."""


async def best_effort(work: Awaitable[None], what: str = "deferred work") -> None:
    """Await ``work``; log instead of raising (the answer has been or will be sent anyway)."""
    try:
        await work
    except Exception:
        log.exception("%s failed", what)


async def run_or_defer(work: Awaitable[None], defer: Defer | None, what: str) -> None:
    """Hand ``work`` to ``defer`` when there is one, otherwise run it now; best effort."""
    guarded = best_effort(work, what)
    if defer is None:
        await guarded
    else:
        defer(guarded)
