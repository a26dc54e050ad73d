"""Garbage collection of published versions: keep a few, delete what no kept version names.

Why it needs care (docs/adr/0017): since content-named files are shared by the versions that
name them (``router.package.version.layout``), deleting a version is no longer deleting its folder.
What
a version references is read from the version itself — its manifest, then its partitions'
resident directories, which name every lazy file (``router.package.version.listing.lazy_files``) —
so
only objects that no kept version's directories name are deleted. When a kept version cannot be
read whole (a damaged manifest or bundle), nothing is deleted: a wrong guess would break a
version that serves or that a rollback returns to.

What is kept: the active version, the previous one (the rollback target), and the ``keep`` most
recently published others (newest first as the relational store says; versions without rows
count as older than every version with rows). What goes, for each other version: its own
files (``packages/<version>/``), its D1 rows, its Vectorize records (ids
``<version>:<section>``, when an index is given), and, through ``forget_version``, its publish
journal. Shared objects go when no kept version names them. A version's manifest is deleted
last, so an interrupted collection is found and finished by the next run.

Do not run it while a publish to the same target is under way: a publish that found a shared
object present relies on it staying there until it activates. Sans-I/O: ports only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from router.errors import ConfigError, PackageFormatError, RouterError
from router.package.version.fetch import FETCH_BATCH, fetch_package_files
from router.package.version.layout import OBJECTS_PREFIX, PACKAGES_PREFIX, key_owner, package_key
from router.package.version.listing import lazy_files
from router.package.version.manifest import MANIFEST_NAME, Manifest
from router.ports import (
    ACTIVE_VERSION_KEY,
    PREVIOUS_VERSION_KEY,
    BlobListing,
    BlobStore,
    KeyValueStore,
    VectorIndex,
    VersionRows,
)
from router.service import package_getter
from router.sync import concurrently
from router.vectors.records import vector_id

__all__ = ["GcError", "GcPlan", "collect", "plan_gc"]

ForgetVersion = Callable[[str], Awaitable[None]]
"""Removes what a publish journal holds for one version of the collected target."""


class GcError(RouterError):
    """A collection that would not be safe (a kept version unreadable), or that failed."""

    code = "gc_failed"


@dataclass
class GcPlan:
    """What a collection keeps and deletes; computed before anything is deleted (``--dry-run``
    prints it and stops)."""

    active: str | None
    previous: str | None
    kept: list[str]
    dropped: list[str]
    version_keys: list[str] = field(default_factory=list)  # the dropped versions' own files
    object_keys: list[str] = field(default_factory=list)  # shared objects nothing kept names
    objects_kept: int = 0
    rows: list[str] = field(default_factory=list)  # versions whose D1 rows go
    vector_ids: list[str] = field(default_factory=list)

    @property
    def delete_keys(self) -> list[str]:
        """Every blob to delete, in deletion order: shared objects, then each dropped version's
        files with its manifest last."""
        last = [k for k in self.version_keys if k.endswith("/" + MANIFEST_NAME)]
        first = [k for k in self.version_keys if not k.endswith("/" + MANIFEST_NAME)]
        return [*self.object_keys, *first, *last]


def _listing(blobs: BlobStore) -> BlobListing:
    if not isinstance(blobs, BlobListing):
        raise ConfigError("this blob store cannot list its keys: kr gc cannot collect it")
    return blobs


async def plan_gc(
    blobs: BlobStore,
    kv: KeyValueStore,
    rows: VersionRows | None,
    keep: int,
    *,
    with_vectors: bool = False,
) -> GcPlan:
    """Decide what to keep and delete (nothing is deleted here). ``with_vectors``: also list
    the dropped versions' vector ids (read from their manifests)."""
    if keep < 0:
        raise ConfigError(f"--keep must be 0 or more, got {keep}")
    keys = await _listing(blobs).list_keys(PACKAGES_PREFIX)
    owners = {key: key_owner(key) for key in keys}
    stored = {owner[0] for owner in owners.values() if owner and owner[0] is not None}
    with_rows = await rows.versions() if rows is not None else []
    newest_first = [*with_rows, *sorted(stored - set(with_rows), reverse=True)]
    active = await kv.get(ACTIVE_VERSION_KEY)
    previous = await kv.get(PREVIOUS_VERSION_KEY)
    pinned = [v for v in (active, previous) if v]
    others = [v for v in newest_first if v not in pinned]
    kept = [*dict.fromkeys(pinned), *others[:keep]]
    referenced: set[str] = set()
    for version in kept:  # grows: a kept delta's base is kept, and scanned in turn
        if version in stored:
            names, homes = await _referenced(blobs, version)
            referenced |= names
            kept += [home for home in homes if home not in kept]  # a delta's base stays whole
    dropped = [v for v in others if v not in kept]

    objects = [k for k in keys if k.startswith(OBJECTS_PREFIX)]
    plan = GcPlan(active=active, previous=previous, kept=kept, dropped=dropped)
    plan.object_keys = [k for k in objects if k not in referenced]
    plan.objects_kept = len(objects) - len(plan.object_keys)
    gone = set(dropped)
    plan.version_keys = [k for k, o in owners.items() if o and o[0] in gone]
    plan.rows = [v for v in with_rows if v in gone]
    if with_vectors:
        for version in dropped:
            plan.vector_ids += await _vector_ids(blobs, version)
    return plan


async def _referenced(blobs: BlobStore, version: str) -> tuple[set[str], set[str]]:
    """The shared object keys a kept version's directories name, and the other versions whose
    files, rows and vectors it uses (a delta's base, docs/adr/0020); ``GcError`` when the
    version cannot be read whole (then no one can say what it needs)."""
    where = f"kept version {version}"
    try:
        files = await fetch_package_files(
            package_getter(blobs, version),
            where,
            with_vectors=False,
            with_lazy=False,
            follow=lambda manifest: package_getter(blobs, version, manifest),
        )
        manifest = Manifest.from_bytes(files[MANIFEST_NAME])
        resident = {n: manifest.verify(n, b) for n, b in files.items() if n != MANIFEST_NAME}
        names = lazy_files(manifest, resident)
    except PackageFormatError as exc:
        raise GcError(
            f"{where} cannot be read ({exc.message}); nothing was deleted: repair or "
            "republish it first"
        ) from exc
    return {package_key(version, name) for name in names}, set(manifest.bases)


async def _vector_ids(blobs: BlobStore, version: str) -> list[str]:
    """``<version>:<section>`` for every section of a dropped version with vectors (none when
    its manifest is gone or unreadable: its vectors were then never upserted or are gone)."""
    blob = await package_getter(blobs, version)(MANIFEST_NAME)
    if blob is None:
        return []
    try:
        manifest = Manifest.from_bytes(blob)
    except PackageFormatError:
        return []
    if not manifest.embedding:
        return []
    return [vector_id(version, s) for s in range(int(manifest.counts.get("sections", 0)))]


async def collect(
    plan: GcPlan,
    blobs: BlobStore,
    rows: VersionRows | None = None,
    vectors: VectorIndex | None = None,
    forget_version: ForgetVersion | None = None,
) -> None:
    """Carry ``plan`` out: vectors, rows and journals of the dropped versions, then the blobs
    (:attr:`GcPlan.delete_keys`' order), ``FETCH_BATCH`` deletions at a time. Every deletion
    is idempotent, so an interrupted collection is finished by running it again."""
    if vectors is not None and plan.vector_ids:
        await vectors.delete_by_ids(plan.vector_ids)
    if rows is not None:
        for version in plan.rows:
            await rows.drop_version(version)
    if forget_version is not None:
        for version in plan.dropped:
            await forget_version(version)
    await _delete(_listing(blobs), plan.delete_keys)


async def _delete(listing: BlobListing, keys: Sequence[str]) -> None:
    for start in range(0, len(keys), FETCH_BATCH):
        await concurrently([listing.delete(key) for key in keys[start : start + FETCH_BATCH]])
