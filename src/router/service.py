"""The query service: keeps the active package loaded and answers requests through the cascade.

Why it holds the previous package: activating a version is a single KV write; if the newly active
package turns out corrupt or partial, it is refused and the version already loaded keeps serving.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from router.config import RouterConfig
from router.contract import QueryRequest, QueryResponse
from router.errors import NoActiveVersionError, PackageFormatError
from router.metrics import Metrics
from router.package.manifest import MANIFEST_NAME, Manifest
from router.package.reader import KnowledgePackage, load_package
from router.pipeline import CascadeServices, run_cascade
from router.ports import (
    ACTIVE_VERSION_KEY,
    BlobStore,
    Embedder,
    Generator,
    KeyValueStore,
    VectorIndex,
)
from router.stages.cache import QueryCache
from router.vectors.records import section_records

__all__ = ["KnowledgeService", "package_key"]

log = logging.getLogger(__name__)


def package_key(version: str, name: str) -> str:
    """Blob key of one package artifact (R2 layout: ``packages/<version>/<name>``)."""
    return f"packages/{version}/{name}"


@dataclass
class KnowledgeService:
    kv: KeyValueStore
    blobs: BlobStore
    config: RouterConfig = field(default_factory=RouterConfig)
    embedder: Embedder | None = None
    vector_index: VectorIndex | None = None
    generator: Generator | None = None
    cache: QueryCache | None = None
    # True for an in-process index: upsert the package's vectors when it is loaded. Vectorize
    # is filled by ``kr publish`` instead.
    load_vectors_on_activation: bool = False
    metrics: Metrics = field(default_factory=Metrics)
    _package: KnowledgePackage | None = field(default=None, init=False)
    last_load_error: str | None = field(default=None, init=False)

    async def active_version(self) -> str:
        version = await self.kv.get(ACTIVE_VERSION_KEY)
        if not version:
            raise NoActiveVersionError("no knowledge version is active: run `kr build` first")
        return version

    async def active_manifest(self) -> Manifest:
        """The active version's manifest (cheap: one KV read, one small blob)."""
        version = await self.active_version()
        return Manifest.from_bytes(await self._blob(version, MANIFEST_NAME))

    async def package(self) -> KnowledgePackage:
        """The active package, loaded once per version; a bad new version keeps the old one."""
        version = await self.active_version()
        current = self._package
        if current is not None and current.version == version:
            return current
        try:
            loaded = await self.load(version)
        except PackageFormatError as exc:
            self.last_load_error = f"{version}: {exc.message}"
            if current is None:
                raise
            log.error("refusing knowledge version %s, still serving %s", version, current.version)
            return current
        if self.load_vectors_on_activation and self.vector_index is not None:
            await self.vector_index.upsert(section_records(loaded))
        self._package = loaded
        self.last_load_error = None
        return loaded

    async def load(self, version: str) -> KnowledgePackage:
        manifest = await self._blob(version, MANIFEST_NAME)
        artifacts = {}
        for name in Manifest.from_bytes(manifest).artifact_names:
            artifacts[name] = await self._blob(version, name)
        package = load_package(manifest, artifacts.__getitem__)
        if package.version != version:
            raise PackageFormatError(f"package stored as {version} declares {package.version}")
        return package

    async def query(self, request: QueryRequest, today: str | None = None) -> QueryResponse:
        package = await self.package()
        services = CascadeServices(
            embedder=self.embedder,
            vector_index=self.vector_index,
            generator=self.generator,
            cache=self.cache,
            metrics=self.metrics,
        )
        return await run_cascade(package, request, self.config, services, today=today)

    async def _blob(self, version: str, name: str) -> bytes:
        blob = await self.blobs.get(package_key(version, name))
        if blob is None:
            raise PackageFormatError(f"package {version} has no {name} (partial upload?)")
        return blob
