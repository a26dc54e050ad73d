"""Runs *inside* Pyodide (loaded by tests/pyodide/host.mjs): drives the Worker like workerd does.

Why this module: workerd instantiates the entry's ``Default`` class with ``(ctx, env)`` for every
request and calls its methods through the SDK's RPC conversions (``python_from_rpc`` on the
arguments, ``python_to_rpc`` on the result; ``introspection.wrapper_func`` in workerd). Doing the
same here means the real ``src/entry.py`` sees exactly the objects it sees on Cloudflare: a
``workers.Request``, an ``env`` wrapped by the SDK, bindings behind ``_BindingWrapper``.

It also publishes packages into the bindings from inside Pyodide (through the Worker's own
Cloudflare adapters) and stores deliberately broken versions for the refusal tests.

This file is not imported by CPython: ``js``, ``pyodide`` and ``workers`` exist only in Pyodide.
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
import time
from pathlib import Path
from typing import Any

_entry: Any = None


def patch_runtime() -> None:
    """What the Workers runtime patches before user code runs (workers-runtime-sdk's
    ``_workers_sdk_package_patches``): ``anyio.to_thread.run_sync`` runs inline, as there are
    no threads."""
    import anyio.to_thread

    async def run_sync(func: Any, *args: Any, **_options: Any) -> Any:
        return func(*args)

    anyio.to_thread.run_sync = run_sync  # type: ignore[assignment]


def load_entry(module_dir: str, module_name: str) -> float:
    """Import the Worker's main module the way workerd does (its folder first on sys.path);
    returns the import time in milliseconds."""
    global _entry
    if module_dir not in sys.path:
        sys.path.insert(0, module_dir)
    started = time.perf_counter()
    _entry = importlib.import_module(module_name)
    return (time.perf_counter() - started) * 1000.0


def new_instance(ctx: Any, env: Any, class_name: str = "Default") -> Any:
    """``Default(ctx, env)`` with the JS objects, as workerd's ``initPyInstance`` does."""
    return getattr(_entry, class_name)(ctx, env)


def _relaxed(method: Any, args: list[Any]) -> list[Any]:
    """Drop trailing arguments the method does not accept (workerd's ``relaxed_call``)."""
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return args
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return args
    positional = [
        p
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    return args[: len(positional)]


async def call(instance: Any, prop: str, *args: Any) -> Any:
    """Call a handler like workerd's ``wrapper_func(relaxed=True, ...)``."""
    from workers import python_from_rpc, python_to_rpc

    method = getattr(instance, prop)
    py_args = _relaxed(method, [python_from_rpc(arg) for arg in args])
    result = method(*py_args)
    if inspect.isawaitable(result):
        result = await result
    return python_to_rpc(result)


def _read_package(directory: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(Path(directory).iterdir()) if p.is_file()}


async def publish(ctx: Any, env: Any, directory: str, activate: bool = True) -> str:
    """Publish a built package from inside the Worker's runtime, through its own Cloudflare
    adapters: R2 blobs, D1 rows, Vectorize vectors, then (optionally) the KV activation, with
    the router's publisher. Returns the report as JSON."""
    from router.adapters.cloudflare import bindings
    from router.ops.publish import MemoryJournal, PublishTarget, publish
    from router.package.version.manifest import MANIFEST_NAME, Manifest

    files = _read_package(directory)
    b = bindings(new_instance(ctx, env).env)  # the env exactly as the Worker sees it
    if b.kv is None or b.blobs is None:
        raise RuntimeError("the wrangler configuration has no KV or R2 binding")
    embedding = Manifest.from_bytes(files[MANIFEST_NAME]).embedding or {}
    dimensions = int(embedding.get("dimensions", 0))
    target = PublishTarget(
        name="pyodide-host",
        blobs=b.blobs,
        kv=b.kv,
        relational=b.relational,
        vectors=b.vector_index(dimensions) if dimensions else None,
    )
    started = time.perf_counter()
    report = await publish(files, target, MemoryJournal(), activate_now=activate)
    return json.dumps(
        {
            "version": report.version,
            "activated": report.activated,
            "steps": report.ran,
            "vectors": report.vectors_upserted,
            "ms": (time.perf_counter() - started) * 1000.0,
        }
    )


async def store_unverified(ctx: Any, env: Any, directory: str, version: str) -> str:
    """Write a package's files as they are (possibly corrupt) and activate ``version``: what a
    broken or partial upload looks like to the serving Worker. Returns JSON."""
    from router.adapters.cloudflare import bindings
    from router.ports import ACTIVE_VERSION_KEY
    from router.service import package_key

    b = bindings(new_instance(ctx, env).env)
    files = _read_package(directory)
    for name, data in files.items():
        await b.blobs.put(package_key(version, name), data)
    await b.kv.put(ACTIVE_VERSION_KEY, version)
    return json.dumps({"version": version, "files": sorted(files)})


async def run_code(ctx: Any, env: Any, code: str) -> str:
    """Run test code with ``env`` (the Worker's view) in scope; returns ``result`` as JSON."""
    from pyodide.code import eval_code_async

    namespace: dict[str, Any] = {"env": new_instance(ctx, env).env, "result": None}
    await eval_code_async(code, namespace)
    return json.dumps(namespace.get("result"), default=str)
