"""Publishing a built package: blobs, then rows, then vectors, then activation — last and atomic.

Why this order: artifacts are immutable and addressed by version, so writing them can never
disturb the version being served; every blob is read back and checked against the manifest's
sha256 before anything else refers to it; D1 rows and Vectorize vectors are scoped by version, so
they are invisible until the version is active; the single KV write of the active version is the
switch, so a query sees the old version or the new one, never a mix.

Why a journal: a publish to Cloudflare is dozens of requests, and any of them may fail. A publish
is a fixed sequence of named steps (``ops.publish_plan.plan_steps``); each finished step is
recorded in a :class:`~router.ports.PublishJournal` keyed by target + version, so re-running an
interrupted publish resumes at the first unfinished step, and re-running a finished one does
nothing. Every step is idempotent on its own (a blob PUT, a vector upsert by id, the version's D1
rows deleted and re-inserted), so a step cut short and run again is harmless too. Sans-I/O: ports
only.

Why a delta (docs/adr/0017): a content-named file lives at a key shared by every version
(``router.package.version.layout``), so one the target already holds — same name, same bytes, same
size — is not uploaded again; a new version of a large package sends its changed chunks and
its resident files only. Presence is asked before the blob steps, concurrently
(:class:`~router.ports.BlobPresence`, else ``get``). The verify step reads back every blob
uploaded (in this run or an earlier, interrupted one) and checks that every reused one is
still there with its size; a reused blob's bytes are checked on every read anyway, against its
name. The journal remembers which blobs were reused (``reused:<name>``) and which failed
verification (``rewrite:<name>``: uploaded on the next run without asking whether present).

The run is here; the plan and the delta are ``ops.publish_plan``, the verify step
``ops.publish_verify``, the D1 rows ``ops.publish_rows``, what a run did ``ops.publish_report``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from router.errors import PackageFormatError, RouterError
from router.ops.activation import activate
from router.ops.publish_plan import (
    ACTIVATE_STEP,
    ROWS_STEP,
    VECTOR_BATCH,
    VERIFY_STEP,
    files_present,
    plan_steps,
    published_elsewhere,
    reused_mark,
    size_of,
)
from router.ops.publish_report import PublishReport
from router.ops.publish_rows import streamed_rows
from router.ops.publish_verify import verify_blobs
from router.package.reader import KnowledgePackage, load_package
from router.package.version.layout import file_key, package_key
from router.package.version.manifest import MANIFEST_NAME, Manifest
from router.ports import (
    BlobStore,
    KeyValueStore,
    PublishJournal,
    RelationalStore,
    VectorIndex,
    VectorRecord,
)
from router.vectors.records import section_records

__all__ = [
    "MemoryJournal",
    "PublishError",
    "PublishTarget",
    "StepCallback",
    "publish",
    "publish_direct",
    "publish_package",
    "read_package",
]

StepCallback = Callable[[str, str], None]
"""``(step, status)`` with status ``"start"``, ``"done"`` or ``"skip"`` (already journaled)."""


class PublishError(RouterError):
    """A publish step failed; names the step, the version and the target, and how to resume.

    ``cause`` is the underlying error (a Cloudflare API error, a wrangler failure, an
    integrity failure); finished steps stay journaled, so re-running the same command resumes.
    """

    code = "publish_failed"
    http_status = 502

    def __init__(self, step: str, version: str, target: str, cause: RouterError) -> None:
        super().__init__(
            f"publishing {version} to {target} stopped at step {step}: [{cause.code}] "
            f"{cause.message} (the version was not activated; finished steps are kept, "
            "run the same command again to resume)"
        )
        self.step = step
        self.version = version
        self.target = target
        self.cause = cause


@dataclass
class PublishTarget:
    """Where a package goes: the ports of one deployment, and a name that identifies it.

    ``name`` keys the journal, so it must differ between deployments (account + resource ids
    for Cloudflare, the state folder locally). ``relational`` and ``vectors`` are optional: a
    target without a vector index (wrangler's local mode, which has no Vectorize) skips them.
    """

    name: str
    blobs: BlobStore
    kv: KeyValueStore
    relational: RelationalStore | None = None
    vectors: VectorIndex | None = None
    vector_batch: int = VECTOR_BATCH
    reuse_objects: bool = True
    """Ask which content-named files the target holds and skip those (the delta). Off where
    asking costs what uploading does (wrangler's local state: one process per question)."""


class MemoryJournal:
    """A journal that lives as long as the object: a publish without resumption."""

    def __init__(self) -> None:
        self._done: dict[tuple[str, str], set[str]] = {}

    async def done(self, target: str, version: str) -> set[str]:
        return set(self._done.get((target, version), set()))

    async def record(self, target: str, version: str, step: str) -> None:
        self._done.setdefault((target, version), set()).add(step)

    async def forget(self, target: str, version: str, steps: Sequence[str]) -> None:
        self._done.get((target, version), set()).difference_update(steps)


def read_package(files: Mapping[str, bytes]) -> KnowledgePackage:
    """Decode and verify a package held in memory (refuses a damaged one before any upload)."""
    if MANIFEST_NAME not in files:
        raise PackageFormatError("the package has no manifest.json")
    manifest = Manifest.from_bytes(files[MANIFEST_NAME])
    missing = [name for name in manifest.artifact_names if name not in files]
    if missing:
        raise PackageFormatError(f"package {manifest.knowledge_version} has no {missing[0]}")
    return load_package(files[MANIFEST_NAME], files.__getitem__)


async def publish(
    files: Mapping[str, bytes],
    target: PublishTarget,
    journal: PublishJournal,
    *,
    activate_now: bool = True,
    on_step: StepCallback | None = None,
) -> PublishReport:
    """Run the publish steps not yet journaled for ``target`` + version, in order.

    Activation runs only after every other step of the plan is done (in this run or an earlier
    one), so it is always the last write. A failing step raises :class:`PublishError`; a blob
    that fails verification is forgotten by the journal so the next run uploads it again.
    """
    package = read_package(files)
    version = package.version
    await _check_bases(package.manifest, target)
    steps = plan_steps(
        package,
        files,
        rows=target.relational is not None,
        vectors=target.vectors is not None,
        activate_now=activate_now,
        vector_batch=target.vector_batch,
    )
    report = PublishReport(version=version, target=target.name, steps=steps)
    report.base_blobs = sum(1 for name in files if published_elsewhere(package.manifest, name))
    report.bases = package.manifest.bases
    if package.has_vectors and target.vectors is None:
        report.vectors_skipped = package.manifest.counts["sections"]
    records: list[VectorRecord] = []
    done = await journal.done(target.name, version)
    present: set[str] = set()  # the content-named files the target holds: not sent again
    try:
        if target.reuse_objects:
            present = await files_present(files, target.blobs, package.manifest, steps, done)
    except RouterError as exc:  # reported as the first blob step still to run: it needs it
        first = next((s for s in steps if s.startswith("blob:") and s not in done), steps[0])
        raise PublishError(first, version, target.name, exc) from exc
    for step in steps:
        if step in done:
            report.skipped.append(step)
            if on_step:
                on_step(step, "skip")
            continue
        if step == ACTIVATE_STEP:
            # The invariant, stated once more: every other step is done before the switch.
            unfinished = [s for s in steps if s != ACTIVATE_STEP and s not in done]
            if unfinished:
                cause = RouterError(f"step {unfinished[0]} is not done")
                raise PublishError(step, version, target.name, cause)
        if on_step:
            on_step(step, "start")
        try:
            await _run_step(step, package, files, target, journal, report, records, present)
        except RouterError as exc:
            if isinstance(exc, PublishError):
                raise
            raise PublishError(step, version, target.name, exc) from exc
        await journal.record(target.name, version, step)
        done.add(step)
        report.ran.append(step)
        if on_step:
            on_step(step, "done")
    return report


async def _check_bases(manifest: Manifest, target: PublishTarget) -> None:
    """A delta version (docs/adr/0020) uses the files, rows and vectors its base published:
    refused, before anything is written, where its base was not published."""
    for home in manifest.bases:
        if await target.blobs.get(package_key(home, MANIFEST_NAME)) is None:
            cause = RouterError(
                f"{manifest.knowledge_version} is a delta of {home}, which {target.name} does "
                f"not hold: publish {home} there first"
            )
            raise PublishError(
                "blob:" + MANIFEST_NAME, manifest.knowledge_version, target.name, cause
            )


async def _run_step(
    step: str,
    package: KnowledgePackage,
    files: Mapping[str, bytes],
    target: PublishTarget,
    journal: PublishJournal,
    report: PublishReport,
    records: list[VectorRecord],
    present: set[str],
) -> None:
    """One publish step; ``records`` is filled with the section vectors on first need;
    ``present`` names the content-named files the target already holds."""
    version = package.version
    if step.startswith("blob:"):
        name = step.removeprefix("blob:")
        if name in present:
            await journal.record(target.name, version, reused_mark(name))
            report.blobs_reused += 1
            report.bytes_reused += size_of(files, name)
        else:
            await target.blobs.put(file_key(package.manifest, name), files[name])
            report.blobs_uploaded += 1
            report.bytes_uploaded += len(files[name])
    elif step == VERIFY_STEP:
        await verify_blobs(files, package.manifest, target.name, target.blobs, journal)
    elif step == ROWS_STEP:
        assert target.relational is not None
        rows = streamed_rows(files, package.manifest)  # each table read as it is written
        await target.relational.record_version(version, files[MANIFEST_NAME], rows)
    elif step.startswith("vectors:"):
        assert target.vectors is not None
        if not records:
            records.extend(await section_records(package, published_here=True))
        start = int(step.removeprefix("vectors:")) * target.vector_batch
        batch = records[start : start + target.vector_batch]
        report.vectors_upserted += await target.vectors.upsert(batch)
    elif step == ACTIVATE_STEP:
        report.previous_version = await activate(target.kv, version)
        report.activated = True


async def publish_package(
    files: Mapping[str, bytes],
    blobs: BlobStore,
    kv: KeyValueStore,
    relational: RelationalStore | None = None,
    activate_now: bool = True,
) -> str:
    """Upload, verify, record and (optionally) activate a package in one go; returns its
    version. No journal: every step runs (each is idempotent), as ``kr build`` wants."""
    report = await publish_direct(files, blobs, kv, relational, activate_now)
    return report.version


async def publish_direct(
    files: Mapping[str, bytes],
    blobs: BlobStore,
    kv: KeyValueStore,
    relational: RelationalStore | None = None,
    activate_now: bool = True,
) -> PublishReport:
    """:func:`publish_package`, returning the whole report (what was uploaded and reused)."""
    target = PublishTarget(name="direct", blobs=blobs, kv=kv, relational=relational)
    try:
        return await publish(files, target, MemoryJournal(), activate_now=activate_now)
    except PublishError as exc:
        if isinstance(exc.cause, PackageFormatError):
            raise exc.cause from exc
        raise
