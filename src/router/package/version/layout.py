"""Where a package's files live in a blob store (R2, or the local ``state/r2/`` folder).

Why two places (docs/adr/0017): a file read lazily is named by its content
(``router.package.version.content_names``), so the same name means the same bytes in every version;
it
is stored once, at a key without the version (``packages/_objects/<name>``), and a new version
that keeps it uploads nothing for it. The files that depend on the whole version — the manifest,
the partitions' resident bundles, ``vectors.bin`` — stay under ``packages/<version>/``.

``_objects`` cannot be a version id (``router.package.version.fetch.VERSION_ID`` starts with a
letter or
digit), so the two never collide. Packages published before this layout kept every file under
``packages/<version>/``; :func:`legacy_key` names that place, and a reader that finds a lazy file
missing at its shared key looks there once (``router.service.package_getter``).

A delta version (docs/adr/0020) does not store its base's resident files again: its manifest
names the version whose folder holds each (``Manifest.home``, :func:`file_key`).

Sans-I/O: names in, keys out; :func:`key_owner` reads a listed key back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from router.package.version.content_names import is_lazy

if TYPE_CHECKING:
    from router.package.version.manifest import Manifest

__all__ = [
    "OBJECTS_PREFIX",
    "PACKAGES_PREFIX",
    "file_key",
    "key_owner",
    "legacy_key",
    "object_key",
    "package_key",
    "version_prefix",
]

PACKAGES_PREFIX = "packages/"
OBJECTS_PREFIX = f"{PACKAGES_PREFIX}_objects/"
"""Content-named files, shared by every version that names them."""


def version_prefix(version: str) -> str:
    """The folder of one version's own files: ``packages/<version>/``."""
    return f"{PACKAGES_PREFIX}{version}/"


def object_key(name: str) -> str:
    """The shared key of a content-named file: ``packages/_objects/<name>``."""
    return f"{OBJECTS_PREFIX}{name}"


def legacy_key(version: str, name: str) -> str:
    """Where any file of ``version`` lived before shared objects: ``packages/<version>/<name>``."""
    return f"{version_prefix(version)}{name}"


def package_key(version: str, name: str) -> str:
    """The blob key of one file of ``version``: shared for a content-named (lazy) file,
    per version for the manifest, the bundles and ``vectors.bin``. The one place that decides."""
    return object_key(name) if is_lazy(name) else legacy_key(version, name)


def file_key(manifest: Manifest, name: str) -> str:
    """The blob key of a file of ``manifest``'s version: :func:`package_key`'s, in the folder
    of the version that published it — a delta names its base's resident files where the base
    stored them (``Manifest.home``, docs/adr/0020)."""
    if is_lazy(name) or name not in manifest.artifacts:
        return package_key(manifest.knowledge_version, name)
    return legacy_key(manifest.home(name), name)


def key_owner(key: str) -> tuple[str | None, str] | None:
    """A listed key read back: ``(version, name)`` for a version's own file, ``(None, name)``
    for a shared object, None for a key outside the layout."""
    if key.startswith(OBJECTS_PREFIX):
        name = key.removeprefix(OBJECTS_PREFIX)
        return (None, name) if name else None
    if not key.startswith(PACKAGES_PREFIX):
        return None
    version, slash, name = key.removeprefix(PACKAGES_PREFIX).partition("/")
    return (version, name) if version and slash and name else None
