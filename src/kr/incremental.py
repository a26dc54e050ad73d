"""``kr build`` without a full compile: the files changed since the last full build, compiled as
delta partitions against it (docs/adr/0020) — or the reason a full build is needed instead.

Why a reason and not an error: a delta is an optimisation with a bound. New build settings,
a new parser or synonyms, a new tenant, an id another unchanged file also defines (the full
build's cross-file checks decide those), or more change than ``DeltaPolicy`` allows — each
falls back to the full build, which is always right.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kr.build_base import BuildBase, FileState, file_digest
from kr.document_cache import DocumentCache, parser_digest
from router.compile.corpus import (
    SYNONYMS_FILE,
    Diagnostic,
    build_failure,
    knowledge_file_stats,
    parse_knowledge_file,
)
from router.compile.delta import DeltaPolicy, Placement, changes_since, compile_delta
from router.compile.embedding import PassageEncoder, embed_sections
from router.compile.indexer import BuildConfig, CompiledPackage
from router.errors import KnowledgeFormatError, RouterError
from router.knowledge.model import Document
from router.package.reader import load_package
from router.package.version.listing import lazy_files
from router.package.version.manifest import MANIFEST_NAME, Manifest
from router.package.version.partitions import partition_key
from router.sync import run_sync

__all__ = [
    "DeltaBuild",
    "PackageFiles",
    "Scan",
    "build_fingerprint",
    "old_copies",
    "scan_changes",
    "try_delta",
]


def build_fingerprint(root: Path, config: BuildConfig, encoder: str | None) -> str:
    """What a base stays valid under: the build settings, the parser's sources, the synonyms
    file and the embedder; any change makes the next build a full one."""
    digest = hashlib.sha256(parser_digest())
    digest.update(repr(config).encode())
    digest.update(repr(encoder).encode())
    synonyms = root / SYNONYMS_FILE
    digest.update(synonyms.read_bytes() if synonyms.is_file() else b"-")
    return digest.hexdigest()


@dataclass(frozen=True)
class Scan:
    """The files whose bytes differ from the base's (or that it lacks), and those it had that
    are gone."""

    changed: dict[str, bytes]
    removed: list[str]
    unchanged: int


def scan_changes(root: Path, base: Mapping[str, FileState]) -> Scan:
    """Compare ``root`` with the base: a file whose size and mtime are the base's is taken as
    unchanged (as git's index does); another is read, and changed if its digest differs."""
    changed: dict[str, bytes] = {}
    unchanged = 0
    present = knowledge_file_stats(root)
    for path, size, mtime_ns in present:
        known = base.get(path)
        if known is not None and (size, mtime_ns) == (known.size, known.mtime_ns):
            unchanged += 1
            continue
        raw = (root / path).read_bytes()
        if known is not None and file_digest(raw) == known.digest:
            unchanged += 1
        else:
            changed[path] = raw
    listed = {path for path, _, _ in present}
    return Scan(changed, sorted(path for path in base if path not in listed), unchanged)


@dataclass
class DeltaBuild:
    """An incremental build: the package (the base's partitions and the deltas), its base."""

    package: CompiledPackage
    base_version: str
    base_manifest: Manifest
    scan: Scan
    documents: list[Document]  # the changed and added ones, parsed
    diagnostics: list[Diagnostic] = field(default_factory=list)


def try_delta(
    root: Path,
    base: BuildBase,
    read_base: Callable[[str], bytes],
    *,
    config: BuildConfig,
    fingerprint: str,
    strict: bool = False,
    encoder: PassageEncoder | None = None,
    reuse: DocumentCache | None = None,
    policy: DeltaPolicy | None = None,
) -> DeltaBuild | str:
    """The delta build of ``root`` against ``base`` (``read_base(name)``: a file of the base
    version), or why a full build is needed."""
    if base.version is None:
        return "no full build is recorded in this state"
    if base.fingerprint != fingerprint:
        return "the build settings, parser, synonyms or embedder changed since the full build"
    scan = scan_changes(root, base.files())
    documents, diagnostics = _parse(scan.changed, reuse)
    errors = [d for d in diagnostics if d.level == "error"]
    if strict and errors:
        raise build_failure(errors)
    failed = [d.path for d in errors]
    gone = set(scan.removed) | set(failed) | {doc.path for doc in documents}
    manifest = base.manifest()
    reason = _needs_full(documents, gone, base, manifest, policy or DeltaPolicy())
    if reason is not None:
        return reason
    placed = base.placements(sorted(gone))
    try:
        resident = {name: read_base(name) for name in manifest.artifacts}
        old = old_copies(manifest, read_base, placed)
    except (OSError, RouterError) as exc:
        return f"the base version {manifest.knowledge_version} cannot be read ({exc})"
    changes = changes_since(placed, documents, [*scan.removed, *failed], old)
    embeddings = embed_sections(documents, encoder) if encoder is not None else None
    source: Mapping[str, object] = {
        "files": scan.unchanged + len(documents),
        "skipped": len(errors),
    }
    if not scan.changed and not scan.removed:
        source = manifest.source  # nothing changed: the base version itself
    package = compile_delta(
        manifest, resident, base.partitions(), changes, config, embeddings, source
    )
    unchanged_warnings = base.warnings(skip=gone)  # as a full build prints them, every build
    return DeltaBuild(
        package,
        manifest.knowledge_version,
        manifest,
        scan,
        documents,
        sorted([*unchanged_warnings, *diagnostics], key=lambda d: (d.path, d.line)),
    )


def old_copies(
    manifest: Manifest, read_base: Callable[[str], bytes], placed: Mapping[str, Placement]
) -> dict[str, Document]:
    """The base's copies of the documents a delta replaces or removes, texts included, read
    from the base package (its records and section texts): what they still count in the
    base's statistics, which queries subtract (docs/adr/0020). Questions are in no record, so
    an old copy's questions are not subtracted."""
    wanted: dict[str, list[tuple[str, int]]] = {}
    for path, where in placed.items():
        wanted.setdefault(where.key, []).append((path, where.index))
    indices = [i for i, entry in enumerate(manifest.partitions) if entry.key in wanted]
    package = load_package(read_base(MANIFEST_NAME), read_base, with_vectors=False, only=indices)
    found: dict[str, Document] = {}
    for partition in (p for p in package.loaded if p is not None):
        asked = wanted[partition.key]
        docs, _ = run_sync(partition.records.load(index for _, index in asked))
        first = partition.columns.first
        sections = [s for _, d in asked for s in range(first[d], first[d + 1])]
        texts, _ = run_sync(partition.texts.load(sections))
        for path, index in asked:
            doc = docs[index]
            with_texts = [
                dataclasses.replace(section, text=texts.get(first[index] + number, ""))
                for number, section in enumerate(doc.sections)
            ]
            found[path] = dataclasses.replace(doc, sections=with_texts)
    return found


def _parse(
    changed: Mapping[str, bytes], reuse: DocumentCache | None
) -> tuple[list[Document], list[Diagnostic]]:
    """The changed files parsed (in path order); a malformed one is an error naming its line."""
    documents: list[Document] = []
    diagnostics: list[Diagnostic] = []
    for path in sorted(changed):
        raw = changed[path]
        try:
            doc = reuse.get(path, raw) if reuse is not None else None
            if doc is None:
                doc = parse_knowledge_file(path, raw)
                if reuse is not None:
                    reuse.put(path, raw, doc)
        except KnowledgeFormatError as exc:
            diagnostics.append(Diagnostic("error", exc.path, exc.line, exc.detail))
            continue
        documents.append(doc)
        diagnostics += [Diagnostic("warning", path, n, m) for n, m in doc.warnings]
    return documents, diagnostics


def _needs_full(
    documents: Sequence[Document],
    gone: set[str],
    base: BuildBase,
    manifest: Manifest,
    policy: DeltaPolicy,
) -> str | None:
    """Why these changes cannot be a delta, or None."""
    entries = {entry.key: entry for entry in manifest.partitions}
    sections: dict[str, int] = {}
    for doc in documents:
        key = partition_key(doc.tenant)
        if key not in entries:
            return f"{doc.path}: tenant {doc.tenant!r} has no partition yet"
        sections[key] = sections.get(key, 0) + len(doc.sections)
    for key, count in sections.items():
        if not policy.allows(count, entries[key].sections):
            return (
                f"{count} changed sections in partition {key} exceed the delta bound "
                f"({entries[key].sections} in its base)"
            )
    seen: set[tuple[str, str]] = set()
    for doc in documents:
        key = partition_key(doc.tenant)
        folded = (doc.semantic_id.casefold(), key)
        if folded in seen or _defined_elsewhere(base, "d", folded[0], gone, key):
            return f"{doc.path}: id {doc.semantic_id!r} is defined by another file too"
        seen.add(folded)
        explicit = [s.section_id for s in doc.sections if s.explicit_id]
        if any(_defined_elsewhere(base, "s", s.casefold(), gone, None) for s in explicit):
            return f"{doc.path}: a section id is defined by another file too"
    return None


def _defined_elsewhere(
    base: BuildBase, kind: str, folded: str, gone: set[str], partition: str | None
) -> bool:
    """Whether an unchanged base file defines the id (in ``partition``, when given)."""
    return any(
        path not in gone and (partition is None or key == partition)
        for key, path in base.owners(kind, folded)
    )


class PackageFiles(Mapping[str, bytes]):
    """A delta version's files for publishing: its own, and its base's read on demand from
    where the base was published (``read_base``), never all held at once."""

    def __init__(
        self,
        own: Mapping[str, bytes],
        base: Manifest,
        read_base: Callable[[str], bytes],
        size_base: Callable[[str], int],
    ) -> None:
        self._own = own
        self._read = read_base
        self._size = size_base
        resident = {name: read_base(name) for name in base.artifacts}
        self._base = set(resident) | set(lazy_files(base, resident))
        self._base.discard(MANIFEST_NAME)

    def __getitem__(self, name: str) -> bytes:
        found = self._own.get(name)
        if found is not None:
            return found
        if name not in self._base:
            raise KeyError(name)
        return self._read(name)

    def size_of(self, name: str) -> int:
        """A file's size; a base file's without reading it (``publish`` asks every one)."""
        found = self._own.get(name)
        return len(found) if found is not None else self._size(name)

    def __iter__(self) -> Iterator[str]:
        yield from self._own
        yield from (name for name in self._base if name not in self._own)

    def __len__(self) -> int:
        return len(self._own) + sum(1 for name in self._base if name not in self._own)
