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
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

__all__ = ["beside", "bounded", "concurrently", "run_sync"]

T = TypeVar("T")
P = TypeVar("P")


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


async def beside(
    probe: Awaitable[P],
    early: Callable[[P], bool],
    work: Callable[[Callable[[], P | None]], Awaitable[T]],
    leave: Callable[[Awaitable[None]], None] | None = None,
) -> tuple[P | None, T | None]:
    """``work`` run beside ``probe`` (the query cache's KV read beside the cascade): ``(probe's
    result, None)`` as soon as that result is ``early`` (a hit), else ``(None, work's result)``.

    ``work`` is given ``peek()``: the probe's result if it has arrived, else None — the probe
    never holds the work back, not even at its end (a KV read slower than the whole cascade
    costs the answer nothing; the probe is left to finish on its own). On an early result the
    work is not cancelled (a read cut off halfway could leave an isolate cache half filled): it
    is handed to ``leave`` (the Worker's ``waitUntil``) or left to finish, its result unused.
    Without an event loop: the probe, then the work unless the probe's result is early (they
    never suspend)."""
    if not _loop_running():
        result = await probe
        if early(result):
            return result, None
        return None, await work(lambda: result)
    probe_task = asyncio.ensure_future(probe)

    def peek() -> P | None:
        if not probe_task.done() or probe_task.cancelled() or probe_task.exception():
            return None
        return probe_task.result()

    work_task = asyncio.ensure_future(work(peek))
    await asyncio.wait({probe_task, work_task}, return_when=asyncio.FIRST_COMPLETED)
    found = peek()
    if found is not None and early(found):
        if work_task.done():
            _retrieve(work_task)  # a failure of unused work is not an error
        elif leave is not None:
            leave(_quietly(work_task))
        else:
            work_task.add_done_callback(_retrieve)
        return found, None
    if not probe_task.done():
        probe_task.add_done_callback(_retrieve)  # a late probe's failure is nobody's
    elif not probe_task.cancelled():
        probe_task.exception()
    return None, await work_task


async def _quietly(task: Awaitable[Any]) -> None:
    """Await unused work to its end; its failure is nobody's (its result is not used)."""
    try:
        await task
    except Exception:  # its result, and so its failure, is nobody's
        return


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


async def bounded(job: Awaitable[T], timeout_s: float) -> T:
    """``job``'s result, or ``TimeoutError`` once ``timeout_s`` has passed, when an event loop
    runs; driven by ``run_sync`` it is simply awaited (it never suspends then, so it cannot
    wait for anything)."""
    if _loop_running():
        return await asyncio.wait_for(job, timeout_s)
    return await job
