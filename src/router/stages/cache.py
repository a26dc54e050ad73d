"""Stage — query cache (PRD §30–31): in-isolate LRU in front of the KV port.

Why the key holds context and version: "explique isso" on two pages are two questions, and a
newly activated knowledge version must never serve an answer computed from the previous one.
Key = sha256 of (normalised query, page, tab, focus, date, tenant, flags, top_k, version).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from router.deferral import Defer, run_or_defer
from router.errors import RouterError
from router.lru import LruCache
from router.ports import KeyValueStore
from router.stages.tiers import latency_tier

if TYPE_CHECKING:
    from router.contract import QueryRequest
    from router.state import QueryState

__all__ = [
    "CACHE_PREFIX",
    "CacheLookup",
    "CacheWhere",
    "QueryCache",
    "cache_key",
    "key_of_request",
    "known_lookup",
    "look_up",
    "probe",
    "request_cache_key",
    "trace_lookup",
]

CACHE_PREFIX = "qcache:"
KEY_HEX_CHARS = 40  # of the sha256: 160 bits, no collision in any cache
LLM_KEY_SUFFIX = "+llm"  # an LLM answer and an extractive one are cached apart
CacheWhere = Literal["memory", "kv", "miss", "unavailable", "pending"]
"""unavailable: KV failed (a miss); pending: the answer was ready before KV's (a miss)."""


def cache_key(
    normalized_query: str,
    *,
    version: str,
    tenant: str | None,
    page: str | None,
    tab: str | None,
    focus: str | None,
    day: str,
    include_deprecated: bool,
    top_k: int | None,
    tier: str = "normal",
) -> str:
    identity = json.dumps(
        [normalized_query, version, tenant, page, tab, focus, day, include_deprecated, top_k]
        + ([] if tier == "normal" else [tier]),
        ensure_ascii=False,
    )
    return CACHE_PREFIX + hashlib.sha256(identity.encode()).hexdigest()[:KEY_HEX_CHARS]


class QueryCache:
    """LRU first (microseconds), then KV (shared by isolates); entries are JSON responses."""

    def __init__(self, capacity: int, kv: KeyValueStore | None = None) -> None:
        self.memory: LruCache[str, Any] = LruCache(capacity)
        self.kv = kv

    async def get(self, key: str) -> tuple[dict[str, Any] | None, CacheWhere]:
        """The cached response and where it came from ("memory", "kv" or "miss"; "unavailable"
        when KV failed: the query goes on without the cache rather than failing)."""
        found = self.memory.get(key)
        if found is not None:
            return found, "memory"
        if self.kv is not None:
            try:
                raw = await self.kv.get(key)
            except RouterError:
                return None, "unavailable"
            if raw:
                try:
                    value = json.loads(raw)
                except ValueError:
                    return None, "miss"
                self.memory.put(key, value)
                return value, "kv"
        return None, "miss"

    async def put(self, key: str, value: dict[str, Any], defer: Defer | None = None) -> None:
        """Memory now; the KV copy (slow, shared across isolates) after the response when the
        caller can defer it, and best effort: a failed KV write never fails the query."""
        self.memory.put(key, value)
        if self.kv is not None:
            write = self.kv.put(key, json.dumps(value, ensure_ascii=False))
            await run_or_defer(write, defer, "query cache KV write")


def request_cache_key(state: QueryState) -> str:
    """The key of this request on this package: case-folded normalised text plus everything
    else that changes the answer (UI context, tenant, day, flags, top_k, version, LLM)."""
    return key_of_request(state.request, state.query.text, state.package.version, state.day)


def key_of_request(request: QueryRequest, normalized: str, version: str, day: str) -> str:
    """``request_cache_key`` from what it is made of: nothing of the package but its version,
    so the cache can be probed before the package is loaded. ``normalized`` is the question
    searched (a follow-up completed from ``context``), so two follow-ups alike in words but
    not in their earlier turns never share an entry; the latency tier is part of it."""
    key = cache_key(
        normalized.casefold(),
        version=version,
        tenant=request.tenant,
        page=request.page,
        tab=request.tab,
        focus=request.focus,
        day=day,
        include_deprecated=request.include_deprecated,
        top_k=request.top_k,
        tier=latency_tier(request),
    )
    return key + (LLM_KEY_SUFFIX if request.generate else "")


@dataclass(frozen=True)
class CacheLookup:
    """A cache probe: the key (to store the answer under on a miss) and what was found."""

    key: str
    response: dict[str, Any] | None
    where: CacheWhere


def known_lookup(
    state: QueryState, cache: QueryCache, probed: CacheLookup | None = None
) -> CacheLookup | None:
    """What the cache holds for this request without reading anything: ``probed`` (the probe a
    cold isolate made before loading, for the same key), or the isolate's memory (a hit only);
    None when only KV can say."""
    key = request_cache_key(state)
    if probed is not None and probed.key == key:
        return probed
    remembered = cache.memory.get(key)
    return CacheLookup(key, remembered, "memory") if remembered is not None else None


async def look_up(state: QueryState, cache: QueryCache) -> CacheLookup:
    """Probe the cache (memory, then KV) for this request; traced by :func:`trace_lookup` when
    the cascade reads its result (the probe runs beside the cascade's first reads)."""
    key = request_cache_key(state)
    cached, where = await cache.get(key)
    return CacheLookup(key, cached, where)


def trace_lookup(state: QueryState, found: CacheLookup) -> None:
    """The ``cache`` stage of the trace: hit or not, where, the key's tail."""
    state.trace.stage(
        "cache", hit=found.response is not None, where=found.where, key=found.key[-12:]
    )


async def probe(
    cache: QueryCache, request: QueryRequest, normalized: str, version: str, day: str
) -> CacheLookup:
    """Probe the cache for a request before its package is loaded (a cold isolate)."""
    key = key_of_request(request, normalized, version, day)
    cached, where = await cache.get(key)
    return CacheLookup(key, cached, where)
