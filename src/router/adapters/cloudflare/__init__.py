"""Cloudflare binding adapters: KV, R2, D1, Vectorize and Workers AI behind the router's ports.

Why a package of its own: the sans-I/O core never imports ``js`` or ``pyodide``; these adapters
are the Worker's side of the ports, and :mod:`.jsconv` is the only module that touches Pyodide's
FFI, so everything here also imports (and is tested with Python fakes) in CPython.
"""

from router.adapters.cloudflare.d1 import D1QueryLog, D1RecordRows, D1RelationalStore
from router.adapters.cloudflare.kv import WorkersKV
from router.adapters.cloudflare.r2 import R2BlobStore
from router.adapters.cloudflare.service import (
    CloudflareBindings,
    WorkerSettings,
    bindings,
    build_service,
    reset_service,
    service_from_env,
    settings_from_env,
    warm_from_env,
)
from router.adapters.cloudflare.vectorize import VectorizeIndex
from router.adapters.cloudflare.workers_ai import WorkersAiEmbedder, WorkersAiGenerator

__all__ = [
    "CloudflareBindings",
    "D1QueryLog",
    "D1RecordRows",
    "D1RelationalStore",
    "R2BlobStore",
    "VectorizeIndex",
    "WorkerSettings",
    "WorkersAiEmbedder",
    "WorkersAiGenerator",
    "WorkersKV",
    "bindings",
    "build_service",
    "reset_service",
    "service_from_env",
    "settings_from_env",
    "warm_from_env",
]
