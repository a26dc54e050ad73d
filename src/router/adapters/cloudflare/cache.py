"""R2 behind the colo's cache: content-named package files read through the Workers Cache API.

Why (issue 32, docs/adr/0027): an R2 read from a Worker goes to the bucket's location, tens of
milliseconds away, on every read of every isolate; the colo's own cache (``caches.default``)
answers in a few. A file named by its content (``packages/_objects/<stem>-<sha16>.bin``, and
such a name under a version's folder: :func:`router.package.version.content_names.is_lazy`) is
the same bytes forever, so it can be cached with no invalidation: a hit is served from the
colo, a miss from R2 and then stored in the colo (``put`` after the response, through the
Worker's ``waitUntil``). So is a built version's bundle (``packages/kv-<16 hex>/…``): the version
id digests every artifact's sha256, so those bytes are fixed by the key too, and a tenant's
bundle read on its first question in an isolate no longer goes to R2 on a warm colo (issue 32,
item 2: 4.2 ms a request at 1M). Every other key (the manifest, a version not named by a
build, anything else a publish writes) goes straight to R2: their keys do not name their
content.

A failing cache is a miss: the read goes to R2, never to an error (a 500) of its own; a failed
``put`` is logged and forgotten. The bytes are checked where they are decoded (the reader
verifies each lazy file against the digest in its name), as they are from R2.

The Cache API has no effect on ``*.workers.dev`` (only on a custom domain, Cloudflare docs,
"Cache"): there every read would pay a ``match`` for nothing, so ``KR_COLO_CACHE=off`` turns
this off. Other methods of the R2 store (a range read, ``size``, ``list_keys``) pass through.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from router.adapters.cloudflare.jsconv import (
    byte_length,
    copy_into,
    is_null,
    new_response,
    to_bytes,
)
from router.adapters.cloudflare.r2 import R2BlobStore
from router.deferral import Defer, run_or_defer
from router.package.version.content_names import is_lazy
from router.package.version.layout import OBJECTS_PREFIX, PACKAGES_PREFIX
from router.package.version.manifest import MANIFEST_NAME
from router.ports import Allocate, Blob

__all__ = [
    "BUILT_VERSION",
    "CACHE_CONTROL",
    "CACHE_ORIGIN",
    "ColoCachedBlobs",
    "is_content_named",
]

log = logging.getLogger(__name__)

CACHE_ORIGIN = "https://objects.knowledge-router.internal/"
"""The synthetic origin of the cache's URLs (a key is a URL; it is never fetched)."""
CACHE_CONTROL = "public, max-age=31536000, immutable"
"""A year: the bytes of a content-named key never change (the colo evicts what is not read)."""


BUILT_VERSION = re.compile(r"kv-[0-9a-f]{16}")
"""A version id as a build names it: the digest of every artifact's sha256 and the index's
settings (``Manifest.create``), so the files a version's folder holds are fixed by its name."""


def is_content_named(key: str) -> bool:
    """True for a key whose bytes are fixed by its name: every shared object, a lazy file's
    name under a version's folder (packages published before shared objects), and under a
    built version's folder every artifact (the partitions' bundles, ``vectors.bin``), whose
    sha256 the version id digests. Not the manifest: its bytes also hold what the id does not
    (the source, the counts), and it is what says which version is which."""
    if key.startswith(OBJECTS_PREFIX):
        return True
    if not key.startswith(PACKAGES_PREFIX):
        return False
    folder, _, name = key[len(PACKAGES_PREFIX) :].rpartition("/")
    if is_lazy(name):
        return True
    return BUILT_VERSION.fullmatch(folder) is not None and name != MANIFEST_NAME


class ColoCachedBlobs:
    """The :class:`R2BlobStore` ports (``get``, ``get_into``, ``put`` …) with content-named
    reads served by ``cache`` (``caches.default``) first. ``defer`` runs the cache's ``put``
    after the response (the Worker's ``waitUntil``); without it the put is awaited in place."""

    def __init__(self, r2: R2BlobStore, cache: Any, defer: Defer | None = None) -> None:
        self.r2 = r2
        self.cache = cache
        self.defer = defer

    def __getattr__(self, name: str) -> Any:
        """Any other method of the R2 store (a range read): R2's own (the cache holds whole
        objects of content-named keys only)."""
        return getattr(self.r2, name)

    async def get(self, key: str) -> bytes | None:
        if not is_content_named(key):
            return await self.r2.get(key)
        found = await self._buffer(key)
        return None if found is None else to_bytes(found)

    async def get_into(self, key: str, allocate: Allocate) -> Blob | None:
        """As :meth:`R2BlobStore.get_into`: copied into ``allocate(size)`` when that gives a
        buffer (the shard arena), else as ``bytes``."""
        if not is_content_named(key):
            return await self.r2.get_into(key, allocate)
        found = await self._buffer(key)
        if found is None:
            return None
        target = allocate(byte_length(found))
        if target is None:
            return to_bytes(found)
        copy_into(found, target)
        return target

    # explicit: the ports are runtime-checked protocols, which ``__getattr__`` does not satisfy
    async def put(self, key: str, data: bytes) -> None:
        await self.r2.put(key, data)

    async def size(self, key: str) -> int | None:
        return await self.r2.size(key)

    async def list_keys(self, prefix: str) -> list[str]:
        return await self.r2.list_keys(prefix)

    async def delete(self, key: str) -> None:
        await self.r2.delete(key)

    async def _buffer(self, key: str) -> Any:
        """The object's ``ArrayBuffer``: from the colo's cache, else from R2 (then cached)."""
        url = CACHE_ORIGIN + key
        cached = await self._match(url)
        if cached is not None:
            return cached
        found = await self.r2.get_buffer(key)
        if found is not None:
            await run_or_defer(self._store(url, found), self.defer, "colo cache put")
        return found

    async def _match(self, url: str) -> Any:
        """The cached body, or None on a miss or when the cache fails (then R2 answers)."""
        try:
            response = await self.cache.match(url)
            if is_null(response):
                return None
            return await response.arrayBuffer()
        except Exception as exc:  # any failure of the cache is a miss
            log.warning("colo cache match %s failed: %s", url, exc)
            return None

    async def _store(self, url: str, body: Any) -> None:
        response = new_response(body, {"cache-control": CACHE_CONTROL})
        await self.cache.put(url, response)
