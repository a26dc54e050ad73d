"""Where ``kr`` reads whole packages from: a folder of ``kr build --out``, or the local state.

Why verified whole: evaluation, the gate and ``kr publish`` work on a package's every file
(section vectors included), so each read goes through :func:`router.package.version.fetch.
fetch_package_files`, and a missing file is refused rather than half-loaded.
"""

from __future__ import annotations

from pathlib import Path

from router.adapters.local.state import LocalState
from router.errors import ConfigError, NoActiveVersionError
from router.ops.publish import read_package
from router.package.reader import KnowledgePackage
from router.package.version.fetch import fetch_package_files, is_version_id
from router.package.version.manifest import MANIFEST_NAME
from router.ports import ACTIVE_VERSION_KEY, BlobStore, KeyValueStore
from router.service import KnowledgeService, package_getter, package_key
from router.sync import run_sync

__all__ = [
    "active_package",
    "full_loader",
    "package_folder_files",
    "read_package_folder",
    "require_stored_version",
    "stored_package",
    "stored_package_files",
]


def package_folder_files(folder: Path) -> dict[str, bytes]:
    """The files of a package written by ``kr build --out DIR``: ``DIR/<version>/`` or ``DIR``."""
    if not folder.is_dir():
        raise ConfigError(f"package folder {folder} does not exist")
    if not (folder / MANIFEST_NAME).is_file():
        versions = sorted(p for p in folder.iterdir() if (p / MANIFEST_NAME).is_file())
        if len(versions) != 1:
            listed = ", ".join(p.name for p in versions)
            hint = f"; it holds {listed}: pass one of them" if versions else ""
            raise ConfigError(f"{folder} is not a package folder (no {MANIFEST_NAME}){hint}")
        folder = versions[0]

    async def get(name: str) -> bytes | None:
        path = folder / name
        return path.read_bytes() if path.is_file() else None

    return run_sync(fetch_package_files(get, f"package folder {folder}"))


def read_package_folder(folder: Path) -> KnowledgePackage:
    """A package folder, loaded and verified against its manifest."""
    return read_package(package_folder_files(folder))


async def require_stored_version(spec: str, state: LocalState) -> str:
    """``spec``, if it names a version the local state holds; ``ConfigError`` otherwise (it is
    then neither a package folder, which the caller checked first, nor a version)."""
    if not is_version_id(spec):
        raise ConfigError(f"{spec!r} is neither a package folder nor a knowledge version")
    if await state.blobs.get(package_key(spec, MANIFEST_NAME)) is None:
        raise ConfigError(f"{spec!r} is neither a package folder nor a version in {state.root}")
    return spec


async def stored_package_files(state: LocalState, version: str) -> dict[str, bytes]:
    """Every file of a version published to the local state (``PackageFormatError`` when one
    is missing)."""
    get = package_getter(state.blobs, version)
    return await fetch_package_files(
        get,
        f"version {version} in {state.root}",
        follow=lambda manifest: package_getter(state.blobs, version, manifest),
    )


def full_loader(kv: KeyValueStore, blobs: BlobStore) -> KnowledgeService:
    """A service used only to load (and verify) stored versions whole, section vectors
    included: evaluation fills an in-process vector index from them."""
    return KnowledgeService(kv=kv, blobs=blobs, load_vectors_on_activation=True)


async def stored_package(state: LocalState, version: str) -> KnowledgePackage:
    """A version already published to the local state (verified against its manifest)."""
    return await full_loader(state.kv, state.blobs).load(version)


async def active_package(state: LocalState) -> KnowledgePackage:
    """The version active in the local state."""
    version = await state.kv.get(ACTIVE_VERSION_KEY)
    if not version:
        raise NoActiveVersionError(
            f"no knowledge version is active in {state.root}: run `kr build` first"
        )
    return await stored_package(state, version)
