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
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from router.errors import IntegrityError, PackageFormatError, RouterError
from router.ops.activation import activate
from router.package.manifest import MANIFEST_NAME, Manifest
from router.package.reader import KnowledgePackage, load_package
from router.package.records import records_in_files
from router.ports import (
    BlobStore,
    KeyValueStore,
    PublishJournal,
    RelationalStore,
    VectorIndex,
    VectorRecord,
)
from router.service import package_key
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
    "publish_package",
    "read_package",
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

    @property
    def nothing_to_do(self) -> bool:
        return not self.ran


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
    activate. Pure: the same package and options always give the same plan."""
    names = [*sorted(name for name in files if name != MANIFEST_NAME), MANIFEST_NAME]
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
    steps = plan_steps(
        package,
        files,
        rows=target.relational is not None,
        vectors=target.vectors is not None,
        activate_now=activate_now,
        vector_batch=target.vector_batch,
    )
    report = PublishReport(version=version, target=target.name, steps=steps)
    if package.has_vectors and target.vectors is None:
        report.vectors_skipped = package.manifest.counts["sections"]
    records: list[VectorRecord] = []
    done = await journal.done(target.name, version)
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
            await _run_step(step, package, files, target, journal, report, records)
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


async def _run_step(
    step: str,
    package: KnowledgePackage,
    files: Mapping[str, bytes],
    target: PublishTarget,
    journal: PublishJournal,
    report: PublishReport,
    records: list[VectorRecord],
) -> None:
    """One publish step; ``records`` is filled with the section vectors on first need."""
    version = package.version
    if step.startswith("blob:"):
        name = step.removeprefix("blob:")
        await target.blobs.put(package_key(version, name), files[name])
    elif step == VERIFY_STEP:
        await _verify(files, package.manifest, target, journal)
    elif step == ROWS_STEP:
        assert target.relational is not None
        catalog = package_catalog(files, package.manifest)
        await target.relational.record_version(version, files[MANIFEST_NAME], catalog_rows(catalog))
    elif step.startswith("vectors:"):
        assert target.vectors is not None
        if not records:
            records.extend(await section_records(package))
        start = int(step.removeprefix("vectors:")) * target.vector_batch
        batch = records[start : start + target.vector_batch]
        report.vectors_upserted += await target.vectors.upsert(batch)
    elif step == ACTIVATE_STEP:
        report.previous_version = await activate(target.kv, version)
        report.activated = True


async def _verify(
    files: Mapping[str, bytes], manifest: Manifest, target: PublishTarget, journal: PublishJournal
) -> None:
    """Read every blob back: it must be byte-identical to the local file, which
    :func:`read_package` has already checked against the manifest's sha256."""
    version = manifest.knowledge_version
    bad: list[str] = []
    for name in sorted(files):
        stored = await target.blobs.get(package_key(version, name))
        if stored != files[name]:
            bad.append(name)
    if bad:
        await journal.forget(target.name, version, [blob_step(name) for name in bad])
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
    target = PublishTarget(name="direct", blobs=blobs, kv=kv, relational=relational)
    try:
        report = await publish(files, target, MemoryJournal(), activate_now=activate_now)
    except PublishError as exc:
        if isinstance(exc.cause, PackageFormatError):
            raise exc.cause from exc
        raise
    return report.version


def package_catalog(files: Mapping[str, bytes], manifest: Manifest) -> dict[str, Any]:
    """The partitions' catalogs as one, in package-wide numbering (the partitions in order)."""
    documents: list[dict[str, Any]] = []
    sections: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    for entry in manifest.partitions:
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
