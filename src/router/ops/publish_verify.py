"""The verify step of a publish: every blob it stored read back before anything refers to it.

Why a step of its own (``ops.publish_plan.VERIFY_STEP``), after the blobs and before the rows,
vectors and activation: a blob store may keep a partial or corrupted upload, and nothing may
point at a blob that is not what the manifest says. A blob that fails is forgotten by the
journal (and marked ``rewrite:<name>``), so the next run uploads it again without asking whether
it is present.
"""

from __future__ import annotations

from collections.abc import Mapping

from router.errors import IntegrityError
from router.ops.publish_plan import (
    blob_step,
    published_elsewhere,
    reused_mark,
    rewrite_mark,
    size_of,
    stored_sizes,
)
from router.package.version.content_names import is_lazy
from router.package.version.fetch import FETCH_BATCH
from router.package.version.layout import file_key
from router.package.version.manifest import Manifest
from router.ports import BlobStore, PublishJournal
from router.sync import concurrently

__all__ = ["verify_blobs"]


async def verify_blobs(
    files: Mapping[str, bytes],
    manifest: Manifest,
    target: str,
    blobs: BlobStore,
    journal: PublishJournal,
) -> None:
    """Read every uploaded blob back: it must be byte-identical to the local file, which
    ``ops.publish.read_package`` has already checked against the manifest's sha256. A blob reused
    from an earlier version must be present with its size (its bytes are its name's: every
    read checks them). ``target`` names the journal's target."""
    version = manifest.knowledge_version
    done = await journal.done(target, version)
    own = [name for name in files if not published_elsewhere(manifest, name)]
    reused = sorted(name for name in own if reused_mark(name) in done)
    uploaded = sorted(name for name in own if reused_mark(name) not in done)
    bad: list[str] = []
    for start in range(0, len(uploaded), FETCH_BATCH):
        batch = uploaded[start : start + FETCH_BATCH]
        stored = await concurrently([blobs.get(file_key(manifest, name)) for name in batch])
        bad += [name for name, blob in zip(batch, stored, strict=True) if blob != files[name]]
    sizes = await stored_sizes(blobs, [file_key(manifest, name) for name in reused])
    bad += [name for name, size in zip(reused, sizes, strict=True) if size != size_of(files, name)]
    if bad:
        bad.sort()
        forget = [blob_step(name) for name in bad] + [reused_mark(name) for name in bad]
        await journal.forget(target, version, forget)
        for name in bad:
            if is_lazy(name):
                await journal.record(target, version, rewrite_mark(name))
        raise IntegrityError(
            f"stored {', '.join(bad)} of {version} differ from the package (missing or "
            "corrupted upload); they will be uploaded again on the next run"
        )
