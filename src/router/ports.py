"""Ports: the small interfaces through which storage enters the sans-I/O core.

Why async: Cloudflare bindings (KV, R2, D1) are awaited; the local adapters satisfy the same
protocol, so the core never knows which one it talks to.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = [
    "ACTIVE_VERSION_KEY",
    "PREVIOUS_VERSION_KEY",
    "BlobStore",
    "Clock",
    "KeyValueStore",
    "RelationalStore",
]

ACTIVE_VERSION_KEY = "knowledge:active-version"
PREVIOUS_VERSION_KEY = "knowledge:previous-version"


class KeyValueStore(Protocol):
    """KV: small, hot, eventually consistent values (active version, hot keys)."""

    async def get(self, key: str) -> str | None: ...

    async def put(self, key: str, value: str) -> None: ...


class BlobStore(Protocol):
    """R2: immutable package artifacts addressed by key."""

    async def get(self, key: str) -> bytes | None: ...

    async def put(self, key: str, data: bytes) -> None: ...


class Clock(Protocol):
    """Today's date and a monotonic timer, injected so tests control time."""

    def today(self) -> str: ...

    def monotonic(self) -> float: ...


class RelationalStore(Protocol):
    """D1: documents, sections, links, keywords and versions, as rows (migrations/d1)."""

    async def record_version(
        self, version: str, manifest: bytes, rows: dict[str, list[dict[str, Any]]]
    ) -> None: ...
