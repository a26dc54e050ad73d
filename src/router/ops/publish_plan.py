"""What a publish sends, step by step: its plan, its journal's names, and what it need not send.

Why apart from the run (``ops.publish``): the plan is pure — the same package and options always
give the same steps — and the delta decides what is not sent: a delta version's base files
(``published_elsewhere``: no step at all) and the content-named files the target already holds
with their size (``files_present``: asked before the blob steps, concurrently, via
:class:`~router.ports.BlobPresence` where the store has it, else ``get``; docs/adr/0017). The
journal's marks (``reused:<name>``, ``rewrite:<name>``) are named here, beside the steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from router.package.reader import KnowledgePackage
from router.package.version.content_names import is_lazy
from router.package.version.fetch import FETCH_BATCH
from router.package.version.layout import file_key
from router.package.version.manifest import MANIFEST_NAME, Manifest
from router.package.version.partitions import partition_of
from router.ports import BlobPresence, BlobStore
from router.sync import concurrently

__all__ = [
    "ACTIVATE_STEP",
    "ROWS_STEP",
    "VECTOR_BATCH",
    "VERIFY_STEP",
    "KnownSizes",
    "blob_step",
    "files_present",
    "plan_steps",
    "published_elsewhere",
    "reused_mark",
    "rewrite_mark",
    "size_of",
    "stored_sizes",
    "vector_step",
]

VERIFY_STEP = "verify"
ROWS_STEP = "d1:rows"
ACTIVATE_STEP = "activate"
VECTOR_BATCH = 1000
"""Vectors per upsert step: Vectorize's REST upsert takes at most 1000 vectors per request."""


def blob_step(name: str) -> str:
    return f"blob:{name}"


def vector_step(batch: int) -> str:
    return f"vectors:{batch}"


def reused_mark(name: str) -> str:
    """Journal entry (not a step): the blob of ``name`` was found present, not uploaded."""
    return f"reused:{name}"


def rewrite_mark(name: str) -> str:
    """Journal entry (not a step): the stored ``name`` failed verification; upload it."""
    return f"rewrite:{name}"


def plan_steps(
    package: KnowledgePackage,
    files: Mapping[str, bytes],
    *,
    rows: bool,
    vectors: bool,
    activate_now: bool,
    vector_batch: int = VECTOR_BATCH,
) -> list[str]:
    """The ordered step names of a publish: blobs (manifest last), verify, rows, vectors,
    activate. Pure: the same package and options always give the same plan. A delta
    version's base files are not steps (``published_elsewhere``)."""
    manifest = package.manifest
    names = [
        *sorted(n for n in files if n != MANIFEST_NAME and not published_elsewhere(manifest, n)),
        MANIFEST_NAME,
    ]
    steps = [blob_step(name) for name in names]
    steps.append(VERIFY_STEP)
    if rows:
        steps.append(ROWS_STEP)
    if vectors and package.has_vectors:
        batches = -(-package.manifest.counts["sections"] // vector_batch)
        steps.extend(vector_step(batch) for batch in range(batches))
    if activate_now:
        steps.append(ACTIVATE_STEP)
    return steps


def published_elsewhere(manifest: Manifest, name: str) -> bool:
    """Whether file ``name`` belongs to a partition another version published (a delta's base,
    docs/adr/0020): its base's publish uploaded and verified it, and a version whose manifest is
    in a store is whole there (the manifest is written last and deleted last), so a publish of
    the delta neither uploads nor asks for it — at a million sections, 115k files."""
    if name == MANIFEST_NAME:
        return False
    key, _ = partition_of(name)
    return not manifest.published_here(key)


@runtime_checkable
class KnownSizes(Protocol):
    """Package files that know a file's size without reading it (a delta version's base
    files, read from where the base published them only when uploaded or verified)."""

    def size_of(self, name: str) -> int: ...


def size_of(files: Mapping[str, bytes], name: str) -> int:
    """The size of one package file, not read when ``files`` knows it."""
    return files.size_of(name) if isinstance(files, KnownSizes) else len(files[name])


async def stored_sizes(blobs: BlobStore, keys: Sequence[str]) -> list[int | None]:
    """The sizes of ``keys`` in ``blobs`` (None: absent), asked ``FETCH_BATCH`` at a time:
    ``size`` where the store has it (:class:`~router.ports.BlobPresence`), else ``get``."""
    presence = blobs if isinstance(blobs, BlobPresence) else None

    async def size(key: str) -> int | None:
        if presence is not None:
            return await presence.size(key)
        found = await blobs.get(key)
        return None if found is None else len(found)

    sizes: list[int | None] = []
    for start in range(0, len(keys), FETCH_BATCH):
        sizes += await concurrently([size(key) for key in keys[start : start + FETCH_BATCH]])
    return sizes


async def files_present(
    files: Mapping[str, bytes],
    blobs: BlobStore,
    manifest: Manifest,
    steps: Sequence[str],
    done: set[str],
) -> set[str]:
    """The content-named files whose blob step is still to run and that the target already
    holds with their size — the delta. Resident files (manifest, bundles, vectors) are per
    version: always uploaded (a delta's base files are no step at all: ``published_elsewhere``).
    A file that failed verification is uploaded whatever is there. Asked only of a target that
    reuses objects (``PublishTarget.reuse_objects``)."""
    planned = set(steps)
    names = [
        name
        for name in files
        if is_lazy(name)
        and blob_step(name) in planned
        and blob_step(name) not in done
        and rewrite_mark(name) not in done
    ]
    sizes = await stored_sizes(blobs, [file_key(manifest, name) for name in names])
    return {name for name, size in zip(names, sizes, strict=True) if size == size_of(files, name)}
