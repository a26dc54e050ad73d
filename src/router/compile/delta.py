"""Incremental compile: the base version's partitions untouched, plus one delta partition for
each base partition whose documents changed since (docs/adr/0020).

Why: a full compile reads the whole corpus — every impact depends on its partition's average
length, and term ids, shard boundaries and section numbers shift with any edit — so one edited
file at a million sections rewrote most of the package. A delta compiles only the documents
changed or added since the base (new copies), normalised with the base's average lengths so
their impacts are on the base's scale; the base copies of changed and removed documents are
tombstoned and their sections redirected to the new copies (``router.package.format.amendments``).
Document frequencies and N sum over base and delta, tombstoned copies still counted: stale
within the bound the caller enforces (``DeltaPolicy``), past which it compiles in full.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from router.analysis.analyzer import Analyzer
from router.compile.indexer import (
    BuildConfig,
    CompiledPackage,
    LinkTargets,
    SectionEmbeddings,
    Targets,
    block_frequencies,
    check_stemmer_equality,
    compile_partition,
    embedding_rows,
    group_partitions,
    link_targets,
    partition_artifacts,
    partition_vectors,
    pystemmer,
    section_index_text,
)
from router.errors import ConfigError
from router.knowledge.model import Document
from router.package.format.amendments import AMENDMENTS_NAME, encode_amendments
from router.package.version.content_names import is_lazy
from router.package.version.manifest import Manifest
from router.package.version.partitions import (
    SHARED_PARTITION,
    PartitionEntry,
    delta_key,
    delta_numbering,
    partition_key,
)

__all__ = [
    "BasePartition",
    "DeltaChanges",
    "DeltaPolicy",
    "Placement",
    "base_partitions",
    "changes_since",
    "compile_delta",
    "placements",
]


@dataclass(frozen=True)
class DeltaPolicy:
    """When an incremental build may add a delta rather than compile in full: while every
    delta holds at most ``max_share`` of its base's sections, or ``min_sections`` (small bases
    take a few edits before the bound bites). Past it, the statistics the base was normalised
    with are too stale to keep, and everything is compiled again."""

    max_share: float = 0.05
    min_sections: int = 64

    def __post_init__(self) -> None:
        if not 0 <= self.max_share <= 1 or self.min_sections < 0:
            raise ConfigError("a delta policy needs 0 ≤ max_share ≤ 1 and min_sections ≥ 0")

    def allows(self, delta_sections: int, base_sections: int) -> bool:
        return delta_sections <= max(self.min_sections, self.max_share * base_sections)


@dataclass(frozen=True)
class BasePartition:
    """What a delta needs of the base partition it amends: its manifest entry, the average
    lengths it was normalised with, its accent lexicon, and its link targets."""

    entry: PartitionEntry
    averages: Mapping[str, float]
    lexicon: Mapping[str, str]
    targets: Targets


@dataclass(frozen=True)
class DeltaChanges:
    """The documents changed or added since the base (their current copies, in any order),
    the base documents they replace or that were removed (base key → local indices), and the
    old sections of each replaced document (its path → (section id, view section)), which the
    graph redirects to the new copy."""

    documents: Sequence[Document]
    tombstones: Mapping[str, Sequence[int]]
    old_sections: Mapping[str, Sequence[tuple[str, int]]] = field(default_factory=dict)
    # base key → the old copies of its tombstoned documents, texts included: what they still
    # count in its statistics is subtracted at query time (none: left stale, within the bound)
    old_copies: Mapping[str, Sequence[Document]] = field(default_factory=dict)


@dataclass(frozen=True)
class Placement:
    """Where a base document lives: its partition, its local index, and its sections' ids
    with their view numbers (what a redirect maps from)."""

    key: str
    index: int
    sections: tuple[tuple[str, int], ...]


def placements(base: Manifest, documents: Sequence[Document]) -> dict[str, Placement]:
    """Each base document's placement, by path (``documents``: the full build's input)."""
    firsts = {entry.key: entry.first_section for entry in base.partitions}
    found: dict[str, Placement] = {}
    for tenant, members in group_partitions(documents):
        key = partition_key(tenant)
        number = firsts[key]
        for index, doc in enumerate(members):
            ids = tuple((s.section_id, number + i) for i, s in enumerate(doc.sections))
            found[doc.path] = Placement(key, index, ids)
            number += len(doc.sections)
    return found


def base_partitions(
    package: CompiledPackage, documents: Sequence[Document]
) -> dict[str, BasePartition]:
    """What deltas amending a package compiled in full need of it (``documents``: its input)."""
    found: dict[str, BasePartition] = {}
    entries = {entry.key: entry for entry in package.manifest.partitions}
    for tenant, members in group_partitions(documents):
        key = partition_key(tenant)
        compiled = package.partitions[key]
        targets = link_targets(members, entries[key].first_section)
        found[key] = BasePartition(entries[key], compiled.averages, compiled.lexicon, targets)
    return found


def changes_since(
    placed: Mapping[str, Placement],
    documents: Sequence[Document],
    removed: Sequence[str],
    old: Mapping[str, Document] | None = None,
) -> DeltaChanges:
    """The changes of ``documents`` (changed or added since the base) and ``removed`` paths;
    ``old``: the base's copies of the documents they replace or remove, by path."""
    tombstones: dict[str, list[int]] = {}
    old_sections: dict[str, Sequence[tuple[str, int]]] = {}
    old_copies: dict[str, list[Document]] = {}
    for path in [doc.path for doc in documents] + list(removed):
        where = placed.get(path)
        if where is not None:
            tombstones.setdefault(where.key, []).append(where.index)
            old_sections[path] = where.sections
            if old is not None and path in old:
                old_copies.setdefault(where.key, []).append(old[path])
    return DeltaChanges(
        documents, {k: sorted(v) for k, v in tombstones.items()}, old_sections, old_copies
    )


def compile_delta(
    base: Manifest,
    base_artifacts: Mapping[str, bytes],
    bases: Mapping[str, BasePartition],
    changes: DeltaChanges,
    config: BuildConfig,
    embeddings: SectionEmbeddings | None = None,
    source: Mapping[str, object] | None = None,
) -> CompiledPackage:
    """The new version: ``base``'s partitions (``base_artifacts``: its resident files) and a
    delta per changed base partition. ``embeddings``: the vectors of ``changes.documents``, in
    that order. The package's artifacts are the deltas' files only; the base's stay where the
    base published them, and the manifest says so (``Manifest.home``): no file, D1 row or
    vector record of a base partition is stored again."""
    if any(entry.amends for entry in base.partitions):
        raise ConfigError("a delta amends a base compiled in full, not another delta")
    groups = _by_partition(changes, bases)
    rows = embedding_rows(changes.documents, embeddings)
    check_stemmer_equality(
        Analyzer(config.analyzer).vocabulary_words(
            section_index_text(doc, section, index == 0)
            for doc in changes.documents
            for index, section in enumerate(doc.sections)
        ),
        config.analyzer,
    )
    build_stem = pystemmer(config.analyzer.language)
    base_entries = list(base.partitions)
    shared_first, _ = delta_numbering(base_entries, 0)
    artifacts: dict[str, bytes] = {}
    entries: list[PartitionEntry] = []
    lexicons: list[Mapping[str, str]] = [bases[SHARED_PARTITION].lexicon]
    shared_delta: Targets = ({}, {})
    for key in [e.key for e in base_entries if e.key in groups]:
        members = groups[key]
        own = bases[key]
        is_shared = key == SHARED_PARTITION
        first = shared_first if is_shared else delta_numbering(base_entries, _sections(entries))[1]
        targets = link_targets(members, first)
        layers = (
            (targets, own.targets)
            if is_shared
            else (shared_delta, bases[SHARED_PARTITION].targets, targets, own.targets)
        )
        precedence = _merged(lexicons if is_shared else [lexicons[0], own.lexicon, *lexicons[1:]])
        compiled = compile_partition(
            members,
            config,
            build_stem,
            precedence,
            LinkTargets(layers),
            first,
            (),
            partition_vectors(members, rows, embeddings),
            own.averages,
        )
        files = dict(compiled.files)
        # the old copies' terms are the base's: its analyzer (its lexicon under the shared one)
        base_lexicon = [bases[SHARED_PARTITION].lexicon] + ([] if is_shared else [own.lexicon])
        base_analyzer = Analyzer(
            config.analyzer, stem=build_stem, accent_lexicon=_merged(base_lexicon)
        )
        files[AMENDMENTS_NAME] = encode_amendments(
            changes.tombstones.get(key, ()),
            _redirects(members, first, changes.old_sections),
            block_frequencies(changes.old_copies.get(key, ()), base_analyzer, config),
        )
        artifacts.update(partition_artifacts(delta_key(key), files))
        entries.append(
            PartitionEntry(
                delta_key(key), own.entry.tenant, len(members), compiled.sections, first, key
            )
        )
        if is_shared:
            shared_delta = targets
            lexicons.append(compiled.lexicon)
    resident = {name: blob for name, blob in artifacts.items() if not is_lazy(name)}
    manifest = Manifest.create(
        {**base_artifacts, **resident},
        base.analyzer,
        base.bm25,
        _counts(base, changes, entries),
        dict(source or base.source),
        index=base.index,
        embedding=base.embedding,
        partitions=(*base_entries, *entries),
        homes=dict.fromkeys(base_artifacts, base.knowledge_version),
    )
    return CompiledPackage(manifest, artifacts)


def _by_partition(
    changes: DeltaChanges, bases: Mapping[str, BasePartition]
) -> dict[str, list[Document]]:
    """The changed documents of each base partition (in input order), and an empty group for
    a partition that only lost documents."""
    groups: dict[str, list[Document]] = {
        key: [] for key, dead in changes.tombstones.items() if dead
    }
    for doc in changes.documents:
        key = partition_key(doc.tenant)
        if key not in bases:
            raise ConfigError(f"{doc.path}: tenant {doc.tenant!r} is new: a full build is needed")
        groups.setdefault(key, []).append(doc)
    if any(key not in bases for key in groups):
        raise ConfigError("a tombstone names a partition the base does not have")
    return groups


def _redirects(
    members: Sequence[Document], first: int, old_sections: Mapping[str, Sequence[tuple[str, int]]]
) -> dict[int, int]:
    """Old view section → the new copy's section with the same id, else its first section."""
    redirects: dict[int, int] = {}
    number = first
    for doc in members:
        new = {section.section_id: number + i for i, section in enumerate(doc.sections)}
        for section_id, old in old_sections.get(doc.path, ()):
            redirects[old] = new.get(section_id, number)
        number += len(doc.sections)
    return redirects


def _merged(lexicons: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """One accent lexicon from several, the first holding a word winning (as the view reads)."""
    merged: dict[str, str] = {}
    for lexicon in reversed(lexicons):
        merged.update(lexicon)
    return merged


def _sections(entries: Sequence[PartitionEntry]) -> int:
    """Sections of the shared delta among ``entries`` (0 without one)."""
    return sum(e.sections for e in entries if e.amends == SHARED_PARTITION)


def _counts(
    base: Manifest, changes: DeltaChanges, entries: Sequence[PartitionEntry]
) -> dict[str, int]:
    """The manifest's counts: live documents; sections, partitions as listed (tombstoned
    sections still occupy their numbers)."""
    dead = sum(len(indices) for indices in changes.tombstones.values())
    counts = dict(base.counts)
    counts["documents"] = base.counts.get("documents", 0) - dead + len(changes.documents)
    counts["sections"] = base.counts.get("sections", 0) + sum(e.sections for e in entries)
    counts["partitions"] = len(base.partitions) + len(entries)
    return counts
