"""Running coroutines that may never suspend: with or without an event loop.

Why: the cascade and the package readers are written once, as coroutines, because in the Worker
their I/O is awaited; with no I/O services (``kr query``, a package folder on disk) they never
suspend, and a caller that is not async can drive them to the end in one step (``run_sync``).
Reads that should share one round trip go through ``concurrently``: gathered when a loop runs,
awaited one by one when ``run_sync`` drives them (``asyncio.gather`` would need a loop).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Coroutine, Sequence
from typing import Any, TypeVar

__all__ = ["bounded", "concurrently", "run_sync"]

T = TypeVar("T")


_DRIVEN_SYNCHRONOUSLY: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "driven_synchronously", default=False
)
"""Set while ``run_sync`` drives a coroutine: even inside a running loop (a sync helper called
from async code), its reads must not be gathered, since gathering suspends."""


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """The coroutine's result; raises ``RuntimeError`` if it tries to wait for I/O."""
    token = _DRIVEN_SYNCHRONOUSLY.set(True)
    try:
        coroutine.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    finally:
        _DRIVEN_SYNCHRONOUSLY.reset(token)
    coroutine.close()
    raise RuntimeError("a coroutine that needs I/O was run synchronously; await it instead")


def _loop_running() -> bool:
    """Whether an event loop drives this call (else fetches are awaited one by one)."""
    if _DRIVEN_SYNCHRONOUSLY.get():
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def concurrently(jobs: Sequence[Awaitable[T]]) -> list[T]:
    """The results of ``jobs`` in order: awaited together when an event loop runs (one round
    trip for their I/O), else one after the other (they never suspend then)."""
    if _loop_running() and len(jobs) > 1:
        return list(await asyncio.gather(*jobs))
    return [await job for job in jobs]


async def bounded(job: Awaitable[T], timeout_s: float) -> T:
    """``job``'s result, or ``TimeoutError`` once ``timeout_s`` has passed, when an event loop
    runs; driven by ``run_sync`` it is simply awaited (it never suspends then, so it cannot
    wait for anything)."""
    if _loop_running():
        return await asyncio.wait_for(job, timeout_s)
    return await job
