"""The only module that touches Pyodide's FFI: Python values to and from JavaScript.

Why one module: binding adapters must run in two worlds. In the Worker (Pyodide) bindings are
JavaScript objects: arguments must become JS objects/arrays, results arrive as ``JsProxy`` and
JS ``null`` arrives as ``jsnull``, which is not ``None`` (measured in Pyodide 314: nested nulls
stay ``jsnull`` after ``to_py()``). In CPython the tests pass Python fakes of the bindings, so
every function here is the identity for plain Python values. ``js`` and ``pyodide`` are imported
inside the functions, so CPython can import this module.

Why :func:`unwrap`: the Workers Python SDK hands ``self.env`` over as a wrapper whose bindings are
``_BindingWrapper`` objects that convert arguments and results their own way (a Python list of
prepared D1 statements, for instance, must stay a list of wrappers there, while a raw binding
needs a JS array of raw statements). The adapters always talk to the raw JS object behind such a
wrapper, so one set of conversions — the ones in this module — applies everywhere.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "BufferResponse",
    "binding",
    "byte_length",
    "copy_into",
    "is_null",
    "is_pyodide",
    "js_global",
    "js_null",
    "new_response",
    "sql_params",
    "to_bytes",
    "to_js",
    "to_py",
    "unwrap",
]


def is_pyodide() -> bool:
    """True inside Pyodide (the Worker, or Pyodide in Node for the integration tests)."""
    return sys.platform == "emscripten"


def to_js(value: Any) -> Any:
    """A Python value as JavaScript: dicts become plain objects (not ``Map``), lists arrays,
    ``bytes`` a ``Uint8Array``. Identity in CPython. ``None`` becomes ``undefined``; use
    :func:`js_null` where JavaScript needs ``null``."""
    if not is_pyodide():
        return value
    import js  # type: ignore[import-not-found]
    from pyodide.ffi import to_js as pyodide_to_js  # type: ignore[import-not-found]

    return pyodide_to_js(value, dict_converter=js.Object.fromEntries)


def to_py(value: Any) -> Any:
    """A JavaScript value as Python: ``JsProxy`` converted deeply (objects → dicts, arrays →
    lists), ``null``/``undefined`` → ``None`` at any depth. Identity for Python values."""
    if value is None or not is_pyodide():
        return value
    from pyodide.ffi import JsProxy, jsnull

    if value is jsnull:
        return None
    if isinstance(value, JsProxy):
        value = value.to_py()
    return _without_jsnull(value, jsnull)


def to_bytes(buffer: Any) -> bytes:
    """An ``ArrayBuffer`` / typed array (``JsProxy``) or a Python buffer as ``bytes``."""
    if isinstance(buffer, bytes):
        return buffer
    if isinstance(buffer, bytearray | memoryview):
        return bytes(buffer)
    if is_pyodide():
        from pyodide.ffi import JsProxy

        if isinstance(buffer, JsProxy):
            if hasattr(buffer, "to_bytes"):  # ArrayBuffer and typed arrays (JsBuffer)
                return bytes(buffer.to_bytes())
            import js

            return bytes(js.Uint8Array.new(buffer).to_bytes())
    raise TypeError(f"expected an ArrayBuffer or bytes, got {type(buffer).__name__}")


def copy_into(buffer: Any, target: memoryview) -> None:
    """Copy an ``ArrayBuffer`` / typed array (or, in CPython, a bytes-like object) into
    ``target``, which must be exactly as long (Pyodide's ``assign_to``: one copy from the JS
    heap into the wasm heap, no intermediate ``bytes``)."""
    if is_pyodide():
        from pyodide.ffi import JsProxy

        if isinstance(buffer, JsProxy):
            import js

            view = buffer if hasattr(buffer, "assign_to") else js.Uint8Array.new(buffer)
            if int(view.byteLength) != len(target):
                raise ValueError(f"{int(view.byteLength)} bytes for a {len(target)}-byte buffer")
            view.assign_to(target)
            return
    source = memoryview(buffer).cast("B")
    if len(source) != len(target):
        raise ValueError(f"{len(source)} bytes for a {len(target)}-byte buffer")
    target[:] = source


def byte_length(buffer: Any) -> int:
    """The length of an ``ArrayBuffer`` / typed array (``JsProxy``) or a Python buffer."""
    if is_pyodide():
        from pyodide.ffi import JsProxy

        if isinstance(buffer, JsProxy):
            return int(buffer.byteLength)
    return memoryview(buffer).nbytes


def js_global(name: str) -> Any:
    """A JavaScript global (``caches`` in the Worker), or None when there is none (CPython)."""
    if not is_pyodide():
        return None
    import js

    value = getattr(js, name, None)
    return None if is_null(value) else value


class BufferResponse:
    """CPython's stand-in for a JS ``Response`` over a buffer (the adapters' tests)."""

    def __init__(self, body: Any, headers: dict[str, str]) -> None:
        self.body = bytes(body)
        self.headers = headers

    async def arrayBuffer(self) -> memoryview:
        return memoryview(bytearray(self.body))


def new_response(body: Any, headers: dict[str, str]) -> Any:
    """A JS ``Response`` whose body is ``body`` (an ``ArrayBuffer``, kept on the JS side: no
    copy through the wasm heap), with ``headers``; a :class:`BufferResponse` in CPython."""
    if not is_pyodide():
        return BufferResponse(body, headers)
    import js

    return js.Response.new(body, to_js({"headers": headers}))


def is_null(value: Any) -> bool:
    """True for ``None`` and JavaScript ``null``/``undefined``, without converting ``value``."""
    if value is None:
        return True
    if is_pyodide():
        from pyodide.ffi import jsnull

        return value is jsnull
    return False


def js_null() -> Any:
    """JavaScript ``null`` (``None`` in CPython)."""
    if not is_pyodide():
        return None
    from pyodide.ffi import jsnull

    return jsnull


def sql_params(values: Sequence[Any]) -> list[Any]:
    """Parameters for D1's ``bind(...)``: ``None`` → ``null`` (D1 rejects ``undefined``),
    booleans → 0/1 (what SQLite stores)."""
    null = js_null()
    return [null if v is None else int(v) if isinstance(v, bool) else v for v in values]


def unwrap(value: Any) -> Any:
    """The raw JS object behind a Workers SDK wrapper (``_BindingWrapper`` keeps it in
    ``_binding``, ``_EnvWrapper`` in ``_env``); any other value unchanged."""
    if value is None or (is_pyodide() and _is_js_proxy(value)):
        return value
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, dict):
        for name in ("_binding", "_env"):
            inner = attributes.get(name)
            if inner is not None and _is_js_proxy(inner):
                return inner
    return value


def binding(env: Any, name: str) -> Any:
    """The binding (or variable) ``name`` of a Worker ``env``, unwrapped, or None when absent.

    ``env`` is a ``JsProxy`` or the SDK's env wrapper in the Worker (a missing property raises
    AttributeError), a mapping or a plain object in tests.
    """
    if env is None:
        return None
    env = unwrap(env)
    value = env.get(name) if isinstance(env, Mapping) else getattr(env, name, None)
    return None if is_null(value) else unwrap(value)


def _is_js_proxy(value: Any) -> bool:
    if not is_pyodide():
        return False
    from pyodide.ffi import JsProxy

    return isinstance(value, JsProxy)


def _without_jsnull(value: Any, jsnull: Any) -> Any:
    if value is jsnull:
        return None
    if isinstance(value, dict):
        return {k: _without_jsnull(v, jsnull) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_jsnull(v, jsnull) for v in value]
    return value
