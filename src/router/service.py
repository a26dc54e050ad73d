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
from router.package.manifest import ARTIFACT_NAMES, MANIFEST_NAME
from router.package.reader import KnowledgePackage, load_package
from router.pipeline import run_query
from router.ports import ACTIVE_VERSION_KEY, BlobStore, KeyValueStore

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
    _package: KnowledgePackage | None = field(default=None, init=False)
    last_load_error: str | None = field(default=None, init=False)

    async def active_version(self) -> str:
        version = await self.kv.get(ACTIVE_VERSION_KEY)
        if not version:
            raise NoActiveVersionError("no knowledge version is active: run `kr build` first")
        return version

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
        self._package = loaded
        self.last_load_error = None
        return loaded

    async def load(self, version: str) -> KnowledgePackage:
        manifest = await self._blob(version, MANIFEST_NAME)
        artifacts = {}
        for name in ARTIFACT_NAMES:
            artifacts[name] = await self._blob(version, name)
        package = load_package(manifest, artifacts.__getitem__)
        if package.version != version:
            raise PackageFormatError(f"package stored as {version} declares {package.version}")
        return package

    async def query(self, request: QueryRequest, today: str | None = None) -> QueryResponse:
        package = await self.package()
        return run_query(package, request, self.config, today=today)

    async def _blob(self, version: str, name: str) -> bytes:
        blob = await self.blobs.get(package_key(version, name))
        if blob is None:
            raise PackageFormatError(f"package {version} has no {name} (partial upload?)")
        return blob
