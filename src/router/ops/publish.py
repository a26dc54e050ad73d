"""Publishing a built package: blobs, then rows, then vectors, then activation — last and atomic.

Why this order: artifacts are immutable and addressed by version, so writing them can never
disturb the version being served; every blob is read back and checked against the manifest's
sha256 before anything else refers to it; D1 rows and Vectorize vectors are scoped by version, so
they are invisible until the version is active; the single KV write of the active version is the
switch, so a query sees the old version or the new one, never a mix.

Why a journal: a publish to Cloudflare is dozens of requests, and any of them may fail. A publish
is a fixed sequence of named steps (:func:`plan_steps`); each finished step is recorded in a
:class:`~router.ports.PublishJournal` keyed by target + version, so re-running an interrupted
publish resumes at the first unfinished step, and re-running a finished one does nothing. Every
step is idempotent on its own (a blob PUT, a vector upsert by id, the version's D1 rows deleted
and re-inserted), so a step cut short and run again is harmless too. Sans-I/O: ports only.

Why a delta (docs/adr/0017): a content-named file lives at a key shared by every version
(``router.package.version.layout``), so one the target already holds — same name, same bytes, same
size — is not uploaded again; a new version of a large package sends its changed chunks and
its resident files only. Presence is asked before the blob steps, concurrently
(:class:`~router.ports.BlobPresence`, else ``get``). The verify step reads back every blob
uploaded (in this run or an earlier, interrupted one) and checks that every reused one is
still there with its size; a reused blob's bytes are checked on every read anyway, against its
name. The journal remembers which blobs were reused (``reused:<name>``) and which failed
verification (``rewrite:<name>``: uploaded on the next run without asking whether present).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from router.errors import IntegrityError, PackageFormatError, RouterError
from router.ops.activation import activate
from router.package.format.records import records_in_files
from router.package.reader import KnowledgePackage, load_package
from router.package.version.content_names import is_lazy
from router.package.version.fetch import FETCH_BATCH
from router.package.version.layout import file_key, package_key
from router.package.version.manifest import MANIFEST_NAME, Manifest
from router.package.version.partitions import partition_of
from router.ports import (
    BlobPresence,
    BlobStore,
    KeyValueStore,
    PublishJournal,
    RelationalStore,
    VectorIndex,
    VectorRecord,
)
from router.sync import concurrently
from router.vectors.records import section_records

__all__ = [
    "ACTIVATE_STEP",
    "ROWS_STEP",
    "VECTOR_BATCH",
    "VERIFY_STEP",
    "MemoryJournal",
    "PublishError",
    "PublishReport",
    "PublishTarget",
    "blob_step",
    "catalog_rows",
    "package_catalog",
    "plan_steps",
    "publish",
    "publish_direct",
    "publish_package",
    "read_package",
    "stored_sizes",
    "vector_step",
]

VERIFY_STEP = "verify"
ROWS_STEP = "d1:rows"
ACTIVATE_STEP = "activate"
VECTOR_BATCH = 1000
"""Vectors per upsert step: Vectorize's REST upsert takes at most 1000 vectors per request."""

StepCallback = Callable[[str, str], None]
"""``(step, status)`` with status ``"start"``, ``"done"`` or ``"skip"`` (already journaled)."""


def blob_step(name: str) -> str:
    return f"blob:{name}"


def vector_step(batch: int) -> str:
    return f"vectors:{batch}"


def _reused_mark(name: str) -> str:
    """Journal entry (not a step): the blob of ``name`` was found present, not uploaded."""
    return f"reused:{name}"


def _rewrite_mark(name: str) -> str:
    """Journal entry (not a step): the stored ``name`` failed verification; upload it."""
    return f"rewrite:{name}"


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


@dataclass
class PublishReport:
    """What one run did: steps run now, steps skipped as already done, the activation."""

    version: str
    target: str
    steps: list[str]
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    activated: bool = False
    previous_version: str | None = None
    vectors_upserted: int = 0
    vectors_skipped: int = 0  # the package has vectors but the target has no vector index
    blobs_uploaded: int = 0  # in this run
    bytes_uploaded: int = 0
    blobs_reused: int = 0  # content-named files the target already held: not sent
    bytes_reused: int = 0
    base_blobs: int = 0  # a delta's files its base published: neither sent nor asked for
    bases: list[str] = field(default_factory=list)

    def blob_summary(self) -> str:
        """``blobs: 12 uploaded (340.1 KiB), 3,410 already there (51.2 MiB)`` (this run), and
        for a delta version ``, 11,564 of its base kv-…``."""
        found = (
            f"blobs: {self.blobs_uploaded:,} uploaded ({_size(self.bytes_uploaded)}), "
            f"{self.blobs_reused:,} already there ({_size(self.bytes_reused)})"
        )
        if self.base_blobs:
            found += f", {self.base_blobs:,} of its base {', '.join(self.bases)}"
        return found

    @property
    def nothing_to_do(self) -> bool:
        return not self.ran


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


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
    try:
        present = await _present(files, target, package.manifest, steps, done)
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


def published_elsewhere(manifest: Manifest, name: str) -> bool:
    """Whether file ``name`` belongs to a partition another version published (a delta's base,
    docs/adr/0020): its base's publish uploaded and verified it, and a version whose manifest is
    in a store is whole there (the manifest is written last and deleted last), so a publish of
    the delta neither uploads nor asks for it — at a million sections, 115k files."""
    if name == MANIFEST_NAME:
        return False
    key, _ = partition_of(name)
    return not manifest.published_here(key)


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
            await journal.record(target.name, version, _reused_mark(name))
            report.blobs_reused += 1
            report.bytes_reused += size_of(files, name)
        else:
            await target.blobs.put(file_key(package.manifest, name), files[name])
            report.blobs_uploaded += 1
            report.bytes_uploaded += len(files[name])
    elif step == VERIFY_STEP:
        await _verify(files, package.manifest, target, journal)
    elif step == ROWS_STEP:
        assert target.relational is not None
        catalog = package_catalog(files, package.manifest)
        await target.relational.record_version(version, files[MANIFEST_NAME], catalog_rows(catalog))
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


async def _present(
    files: Mapping[str, bytes],
    target: PublishTarget,
    manifest: Manifest,
    steps: Sequence[str],
    done: set[str],
) -> set[str]:
    """The content-named files whose blob step is still to run and that the target already
    holds with their size — the delta. Resident files (manifest, bundles, vectors) are per
    version: always uploaded (a delta's base files are no step at all: ``published_elsewhere``).
    A file that failed verification is uploaded whatever is there."""
    if not target.reuse_objects:
        return set()
    planned = set(steps)
    names = [
        name
        for name in files
        if is_lazy(name)
        and blob_step(name) in planned
        and blob_step(name) not in done
        and _rewrite_mark(name) not in done
    ]
    sizes = await stored_sizes(target.blobs, [file_key(manifest, name) for name in names])
    return {name for name, size in zip(names, sizes, strict=True) if size == size_of(files, name)}


async def _verify(
    files: Mapping[str, bytes], manifest: Manifest, target: PublishTarget, journal: PublishJournal
) -> None:
    """Read every uploaded blob back: it must be byte-identical to the local file, which
    :func:`read_package` has already checked against the manifest's sha256. A blob reused
    from an earlier version must be present with its size (its bytes are its name's: every
    read checks them)."""
    version = manifest.knowledge_version
    done = await journal.done(target.name, version)
    own = [name for name in files if not published_elsewhere(manifest, name)]
    reused = sorted(name for name in own if _reused_mark(name) in done)
    uploaded = sorted(name for name in own if _reused_mark(name) not in done)
    bad: list[str] = []
    for start in range(0, len(uploaded), FETCH_BATCH):
        batch = uploaded[start : start + FETCH_BATCH]
        stored = await concurrently([target.blobs.get(file_key(manifest, name)) for name in batch])
        bad += [name for name, blob in zip(batch, stored, strict=True) if blob != files[name]]
    sizes = await stored_sizes(target.blobs, [file_key(manifest, name) for name in reused])
    bad += [name for name, size in zip(reused, sizes, strict=True) if size != size_of(files, name)]
    if bad:
        bad.sort()
        forget = [blob_step(name) for name in bad] + [_reused_mark(name) for name in bad]
        await journal.forget(target.name, version, forget)
        for name in bad:
            if is_lazy(name):
                await journal.record(target.name, version, _rewrite_mark(name))
        raise IntegrityError(
            f"stored {', '.join(bad)} of {version} differ from the package (missing or "
            "corrupted upload); they will be uploaded again on the next run"
        )


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


def package_catalog(files: Mapping[str, bytes], manifest: Manifest) -> dict[str, Any]:
    """The partitions' catalogs as one, in package-wide numbering (the partitions in order).
    A delta version (docs/adr/0020) has rows for its delta partitions only: its base partitions'
    rows are their base version's (``Manifest.partition_home``), (the documents it
    tombstones among them are hidden by the filters before any row is read)."""
    documents: list[dict[str, Any]] = []
    sections: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    for entry in manifest.partitions:
        if not manifest.published_here(entry.key):
            continue  # a delta's base partition: its rows are its base version's
        for local, text in enumerate(records_in_files(files, entry.key)):
            record = json.loads(text)
            sections += [{**s, "doc": len(documents)} for s in record["sections"]]
            documents.append(record)
            records.append({"partition_key": entry.key, "doc_index": local, "record": text})
    return {"documents": documents, "sections": sections, "records": records}


def catalog_rows(catalog: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Rows for the D1 tables, derived from the package catalog."""
    documents = [
        {
            "doc_index": index,
            "semantic_id": doc["id"],
            "tenant": doc["tenant"],
            "title": doc["title"],
            "path": doc["path"],
            "trust": doc["trust"],
            "status": doc["status"],
            "doc_version": doc["version"],
            "valid_from": doc["valid_from"],
            "valid_until": doc["valid_until"],
            "facts": json.dumps(doc["facts"], ensure_ascii=False, sort_keys=True),
        }
        for index, doc in enumerate(catalog["documents"])
    ]
    sections = [
        {
            "section_index": index,
            "doc_index": section["doc"],
            "section_id": section["id"],
            "heading": section["heading"],
            "level": section["level"],
            "flags": ",".join(section["flags"]),
        }
        for index, section in enumerate(catalog["sections"])
    ]
    links = [
        {"section_index": index, "target": target, "label": label}
        for index, section in enumerate(catalog["sections"])
        for target, label in section["links"]
    ]
    keywords = [
        {"doc_index": index, "keyword": keyword}
        for index, doc in enumerate(catalog["documents"])
        for keyword in dict.fromkeys(doc["keywords"])
    ]
    return {
        "documents": documents,
        "sections": sections,
        "links": links,
        "keywords": keywords,
        "records": list(catalog.get("records", [])),
    }
