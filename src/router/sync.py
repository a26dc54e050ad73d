"""Running a coroutine that never suspends, without an event loop.

Why: the cascade and the package readers are written once, as coroutines, because in the Worker
their I/O is awaited; with no I/O services (``kr query``, a package folder on disk) they never
suspend, and a caller that is not async can drive them to the end in one step.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """The coroutine's result; raises ``RuntimeError`` if it tries to wait for I/O."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    coroutine.close()
    raise RuntimeError("a coroutine that needs I/O was run synchronously; await it instead")
