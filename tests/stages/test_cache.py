"""Stage — query cache: the LRU's eviction order and the cache key's parts.

The cache seen through the cascade (memory, KV, versions) is in
``tests/cascade/test_query_cache.py``.
"""

from __future__ import annotations

from typing import Any

from router.lru import LruCache
from router.stages.cache import CACHE_PREFIX, cache_key
from tests.common import ALFA, TODAY


def test_cache_key_separates_every_part_of_the_request() -> None:
    base: dict[str, Any] = {
        "version": "kv-1",
        "tenant": None,
        "page": None,
        "tab": None,
        "focus": None,
        "day": TODAY,
        "include_deprecated": False,
        "top_k": None,
    }
    variants: list[dict[str, Any]] = [
        {"version": "kv-2"},
        {"tenant": ALFA},
        {"page": "profile"},
        {"tab": "general"},
        {"focus": "app.page.profile.pin"},
        {"day": "2026-06-16"},
        {"include_deprecated": True},
        {"top_k": 5},
    ]
    keys = {cache_key("explique isso", **base)} | {
        cache_key("explique isso", **{**base, **change}) for change in variants
    }
    assert len(keys) == len(variants) + 1
    assert all(key.startswith(CACHE_PREFIX) for key in keys)
    assert cache_key("explique isso", **base) == cache_key("explique isso", **base)
    assert cache_key("explique isso", **base) != cache_key("explique aquilo", **base)


def test_lru_cache_evicts_the_least_recently_used_entry() -> None:
    lru = LruCache(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1  # "a" is now the most recently used
    lru.put("c", 3)
    assert lru.get("b") is None
    assert (lru.get("a"), lru.get("c"), len(lru)) == (1, 3, 2)
    lru.put("a", 10)  # overwrite refreshes too
    lru.put("d", 4)
    assert lru.get("c") is None and lru.get("a") == 10 and lru.get("d") == 4
