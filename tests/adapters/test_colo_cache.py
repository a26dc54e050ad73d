"""The colo cache in front of R2 (``ColoCachedBlobs``), with Python fakes: what a content-named
read costs on a warm and a cold colo, and that neither a failing cache nor a non-content-named
key changes what is read."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from router.adapters.cloudflare.cache import CACHE_ORIGIN, ColoCachedBlobs, is_content_named
from router.adapters.cloudflare.r2 import R2BlobStore
from tests.adapters.cloudflare_fakes import FakeR2

SHARD = "packages/_objects/shared.s-0123456789abcdef.bin"
MANIFEST = "packages/kv-1/manifest.json"


class FakeCache:
    """``caches.default``: a dict of URL → body; ``broken`` makes every call fail."""

    def __init__(self, broken: bool = False) -> None:
        self.bodies: dict[str, bytes] = {}
        self.matches: list[str] = []
        self.broken = broken

    async def match(self, url: str) -> Any:
        self.matches.append(url)
        if self.broken:
            raise RuntimeError("cache unavailable")
        body = self.bodies.get(url)
        return None if body is None else _Response(body)

    async def put(self, url: str, response: Any) -> None:
        if self.broken:
            raise RuntimeError("cache unavailable")
        self.bodies[url] = bytes(await response.arrayBuffer())


class _Response:
    def __init__(self, body: bytes) -> None:
        self.body = body

    async def arrayBuffer(self) -> memoryview:
        return memoryview(bytearray(self.body))


def _store(cache: FakeCache, deferred: list[Awaitable[None]] | None = None) -> Any:
    r2 = FakeR2()
    r2.objects = {SHARD: b"shard bytes", MANIFEST: b"{}"}
    defer = deferred.append if deferred is not None else None
    return r2, ColoCachedBlobs(R2BlobStore(r2), cache, defer)


def test_only_keys_that_name_their_content_are_cached() -> None:
    assert is_content_named(SHARD)
    assert is_content_named("packages/kv-1/shared.texts-0123456789abcdef.bin")  # older layout
    assert not is_content_named(MANIFEST)
    assert not is_content_named("packages/kv-1/shared.partition.bin")  # not an id a build made
    built = "packages/kv-0123456789abcdef/"  # an id a build made: the digest of its artifacts
    assert is_content_named(built + "t-0aa27c1242cdc8b7.partition.bin")
    assert is_content_named(built + "shared.vectors.bin")
    assert not is_content_named(built + "manifest.json")
    assert not is_content_named("packages/kv-0123456789abcdef/../kv-1/shared.partition.bin")


def test_a_miss_reads_r2_and_stores_after_the_response_then_the_colo_answers() -> None:
    cache, deferred = FakeCache(), []
    r2, blobs = _store(cache, deferred)
    assert asyncio.run(blobs.get(SHARD)) == b"shard bytes"
    assert r2.gets == [SHARD] and cache.bodies == {}  # the put waits for the response
    for work in deferred:
        asyncio.run(_run(work))
    assert cache.bodies == {CACHE_ORIGIN + SHARD: b"shard bytes"}
    arena = bytearray(11)
    found = asyncio.run(blobs.get_into(SHARD, lambda size: memoryview(arena)[:size]))
    assert bytes(found) == b"shard bytes" == bytes(arena)
    assert r2.gets == [SHARD]  # the second read came from the colo


def test_other_keys_go_straight_to_r2() -> None:
    cache = FakeCache()
    r2, blobs = _store(cache)
    assert asyncio.run(blobs.get(MANIFEST)) == b"{}"
    assert cache.matches == [] and r2.gets == [MANIFEST]
    assert asyncio.run(blobs.size(SHARD)) == len(b"shard bytes")  # R2's own methods pass through
    assert asyncio.run(blobs.list_keys("packages/kv-1/")) == [MANIFEST]


def test_a_failing_cache_is_a_miss_never_an_error() -> None:
    cache = FakeCache(broken=True)
    r2, blobs = _store(cache)  # no defer: the failing put is awaited in place, and logged
    assert asyncio.run(blobs.get(SHARD)) == b"shard bytes"
    assert asyncio.run(blobs.get(SHARD)) == b"shard bytes"
    assert r2.gets == [SHARD, SHARD] and len(cache.matches) == 2


async def _run(work: Awaitable[None]) -> None:
    await work
