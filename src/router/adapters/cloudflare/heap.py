"""The Worker's wasm heap in use, read from Pyodide: what the package's caches are sized from.

Why here (sans-I/O core): only the Worker runs in a WebAssembly heap, and only Pyodide's JS
side can say how much of it is in use. The core gets a number of bytes
(``KnowledgeService.heap_bytes``) and sizes the caches (``router.package.stores.budget``).
The allocator's break (``_sbrk(0)``) is the heap in use at its highest: it never goes down, and
the heap's size is it rounded up to the next growth step (up to 20 % more). Where the break
cannot be read, the heap's size stands in for it (an overstatement: smaller caches, never a
larger heap); outside Pyodide nothing is read and the caches keep their fixed bounds.
"""

from __future__ import annotations

from typing import Any

__all__ = ["wasm_heap_bytes"]


def _module() -> Any:
    try:
        import pyodide_js  # type: ignore[import-not-found]
    except ImportError:
        return None
    return getattr(pyodide_js, "_module", None)


def wasm_heap_bytes() -> int | None:
    """The wasm heap in use (bytes), or None outside Pyodide or when it cannot be read."""
    module = _module()
    if module is None:
        return None
    try:
        brk = getattr(module, "_sbrk", None)
        if brk is not None:
            return int(brk(0)) & 0xFFFFFFFF  # an unsigned 32-bit address
        heap = getattr(module, "HEAP8", None)
        return int(heap.length) if heap is not None else None
    except Exception:  # a JS error crossing into Python: not knowing is no failure
        return None
