"""The one way to gather a package's files (the manifest, then what it lists) from any store.

Why one function: the service (R2 or the local folder), ``kr publish``, ``kr gate`` and ``kr eval``
all read packages; each used to loop over the manifest's artifact names with its own error text.
Where the bytes live is the caller's: it passes ``get(name)``, which returns ``None`` for a
missing file, and this module decides what a missing file means. Sans-I/O.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import cast

from router.errors import PackageFormatError
from router.package.format.bundle import BUNDLE_NAME
from router.package.version.listing import lazy_files
from router.package.version.manifest import MANIFEST_NAME, Manifest
from router.package.version.partitions import DELTA_SUFFIX, partition_file
from router.sync import concurrently

__all__ = [
    "FETCH_BATCH",
    "VERSION_ID",
    "ArtifactGetter",
    "fetch_artifact",
    "fetch_files",
    "fetch_package_files",
    "is_version_id",
]

VERSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
"""A knowledge version id: a letter or digit, then letters, digits, ``.``, ``_`` or ``-``.

It is a key segment in R2 and a folder name locally, so ``/`` and a leading ``.`` are refused."""

FETCH_BATCH = 32
"""Files fetched at once: a Worker keeps six connections open at a time and queues the rest,
and a batch bounds the bytes in flight when a package's lazy files are gathered whole."""

ArtifactGetter = Callable[[str], Awaitable[bytes | None]]
"""``get(name)``: one file of one package version, or ``None`` when the store has no such file."""


def is_version_id(text: str) -> bool:
    """True when ``text`` can name a knowledge version (see ``VERSION_ID``)."""
    return bool(VERSION_ID.match(text))


async def fetch_artifact(get: ArtifactGetter, where: str, name: str) -> bytes:
    """One file of a package; a missing one raises ``PackageFormatError`` naming it."""
    blob = await get(name)
    if blob is None:
        raise PackageFormatError(f"{where} has no {name} (partial upload?)")
    return blob


async def fetch_package_files(
    get: ArtifactGetter,
    where: str,
    *,
    with_vectors: bool = True,
    with_lazy: bool = True,
    partitions: Collection[str] | None = None,
    follow: Callable[[Manifest], ArtifactGetter] | None = None,
) -> dict[str, bytes]:
    """The manifest and every artifact it lists (``vectors.bin`` only if ``with_vectors``), and
    the lazily read files its directories name only if ``with_lazy`` (a server reads those per
    query). ``partitions``: the resident files of these partition keys only (a server reads
    the shared one first, a tenant's when it is asked). ``follow(manifest)``: the getter for
    the files the manifest lists (a delta's base files are in its base version's folder,
    ``router.package.version.layout.file_key``).

    ``where`` names the package in errors ("version v1 in .kr-state"). A missing file raises
    ``PackageFormatError``: a partial upload is refused whole, never half-loaded. The bytes are
    not verified here; ``load_package`` checks each against the manifest's sha256 (and a lazy
    file is checked against its content name when it is read).
    """
    # a partition's bundle has a fixed name, so the ones asked for travel with the manifest:
    # one round trip less for a cold isolate (the manifest still decides what is read); not a
    # delta's (docs/adr/0020), which most versions do not have: a miss is a subrequest too
    guessed = [
        partition_file(key, BUNDLE_NAME)
        for key in sorted(partitions or ())
        if not key.endswith(DELTA_SUFFIX)
    ]
    manifest_blob, *early = await concurrently(
        [fetch_artifact(get, where, MANIFEST_NAME), *(get(name) for name in guessed)]
    )
    manifest = Manifest.from_bytes(cast("bytes", manifest_blob))
    if follow is not None:
        get = follow(manifest)
    files: dict[str, bytes] = {MANIFEST_NAME: cast("bytes", manifest_blob)}
    names = manifest.names_to_read(with_vectors=with_vectors, partitions=partitions)
    files.update((n, b) for n, b in zip(guessed, early, strict=True) if n in names and b)
    files.update(await fetch_files(get, where, [n for n in names if n not in files]))
    if with_lazy:
        resident = {n: manifest.verify(n, b) for n, b in files.items() if n != MANIFEST_NAME}
        files.update(await fetch_files(get, where, list(lazy_files(manifest, resident))))
    return files


async def fetch_files(get: ArtifactGetter, where: str, names: Sequence[str]) -> dict[str, bytes]:
    """``names`` fetched concurrently, in batches of ``FETCH_BATCH`` (one round trip each):
    one after the other, a version of twenty partitions cost twenty round trips to load. A
    missing one raises ``PackageFormatError``."""
    files: dict[str, bytes] = {}
    for start in range(0, len(names), FETCH_BATCH):
        batch = names[start : start + FETCH_BATCH]
        blobs = await concurrently([fetch_artifact(get, where, name) for name in batch])
        files.update(zip(batch, blobs, strict=True))
    return files
