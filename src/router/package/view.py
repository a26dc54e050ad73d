"""What one query sees of a package: the shared partition and the caller's own, as one index.

Why a view per tenant (docs/adr/0010): every stage — exact keys, keyword phrases, typo repair,
the graph, BM25 and its statistics — reads the view, never the package, so nothing of another
tenant's partition can reach a query, its scores or its trace. The view numbers sections as the
partitions already do (shared 0 … S−1, the tenant's own from S), so composing it
(``package.compose``) copies no posting; its derived indexes (``derive``) are built per view, at
first use. Its parts and the sequences it reads lazily are ``package.view_parts``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from router.analysis.analyzer import Analyzer
from router.knowledge.model import Document
from router.package.format.postings import Postings
from router.package.format.vocabulary import TermEntry
from router.package.stores.arena import ArenaLease
from router.package.stores.budget import ReaderBudget
from router.package.stores.cost import ReadCost
from router.package.stores.shards import Loaded, ShardReads, load_shards
from router.package.version.manifest import Manifest
from router.package.view_parts import (
    Amended,
    LoadedDocuments,
    LoadedSections,
    RecordNotLoaded,
    ViewPart,
    ViewTexts,
    from_every_part,
    part_of_doc,
    part_of_section,
)

__all__ = [
    "INHERITED_RELATIONS",
    "ExactTarget",
    "PackageView",
    "VersionFacts",
]

T = TypeVar("T")


@dataclass(frozen=True)
class ExactTarget:
    """What an exact key resolves to: a document, a section or a fact of a document."""

    kind: str  # "document" | "section" | "alias" | "title" | "fact"
    doc_index: int
    section_index: int | None = None
    fact: str | None = None


class VersionFacts:
    """What a loaded version's manifest says of it (the package and each of its views)."""

    manifest: Manifest

    @property
    def version(self) -> str:
        return self.manifest.knowledge_version

    @property
    def vector_versions(self) -> tuple[str, ...]:
        """The versions whose vector records this one searches: its own, and for a delta the
        base version that published its base partitions' (docs/adr/0020)."""
        return (self.version, *self.manifest.bases)

    @property
    def embedding_model(self) -> str | None:
        return self.manifest.embedding.get("model") if self.manifest.embedding else None


@dataclass
class PackageView(VersionFacts):
    """One tenant's (or an anonymous caller's) view: documents, sections, terms and postings of
    the shared partition and at most one tenant partition, plus the indexes derived from them."""

    manifest: Manifest
    parts: tuple[ViewPart, ...]
    doc_count: int
    section_doc: Sequence[int]
    doc_first_section: Sequence[int]
    analyzer: Analyzer
    texts: ViewTexts
    synonyms: list[list[str]]
    shared_view: PackageView | None = None  # the anonymous view (None: this is it)
    budget: ReaderBudget = field(default_factory=ReaderBudget)  # the package's cache bounds
    impact_bounds: dict[tuple[int, int], float] = field(default_factory=dict)  # memoised maxima
    derived: dict[str, Any] = field(default_factory=dict)  # indexes built at first use
    loaded: Mapping[int, Document] = field(default_factory=dict)  # records read by this query
    exact_found: Mapping[str, list[ExactTarget]] = field(default_factory=dict)  # keys looked up
    term_found: Mapping[str, tuple[TermEntry | None, ...]] = field(default_factory=dict)  # per part
    amended: Amended = field(default_factory=Amended)  # what the deltas in view hide, redirect

    def __post_init__(self) -> None:
        # memos keyed by posting block are package-wide: kept on the shared partition
        self.impact_bounds = self.parts[0].partition.derived.setdefault("impact_bounds", {})

    # -- document records: read per query, for what a response shows -------------------------

    @property
    def documents(self) -> LoadedDocuments:
        """The view's documents; only those this query loaded (``with_records``) can be read."""
        return LoadedDocuments(self.loaded, self.doc_count)

    @property
    def sections(self) -> LoadedSections:
        """The view's sections, through their loaded documents."""
        return LoadedSections(self.documents, self.section_doc, self.doc_first_section)

    async def load_records(self, docs: Iterable[int]) -> tuple[dict[int, Document], ReadCost]:
        """Fetch (concurrently, one round trip) the records of ``docs`` (view indices)."""
        wanted: list[list[int]] = [[] for _ in self.parts]
        for doc in set(docs):
            index = part_of_doc(self.parts, doc)
            wanted[index].append(doc - self.parts[index].first_doc)
        jobs = [(part, local) for part, local in zip(self.parts, wanted, strict=True) if local]
        per_part, reads = await from_every_part(
            [part.partition.records.load(local) for part, local in jobs]
        )
        found: dict[int, Document] = {}
        for (part, _), records in zip(jobs, per_part, strict=True):
            found.update({part.first_doc + d: doc for d, doc in records.items()})
        return found, reads

    def with_records(self, records: Mapping[int, Document]) -> PackageView:
        """This view with ``records`` readable (the query holds them, so no cache evicts
        them while it runs); every index and memo stays shared."""
        return dataclasses.replace(self, loaded={**self.loaded, **records})

    def derive(self, name: str, build: Callable[[PackageView], Any]) -> Any:
        """An index derived from this view (synonyms...), built once, lazily."""
        found = self.derived.get(name)
        if found is None:
            found = self.derived[name] = build(self)
        return found

    def shared_memo(self, name: str, build: Callable[[], Any]) -> Any:
        """A memo every view of the package shares (its content must not depend on the view,
        e.g. bounds keyed by posting block)."""
        memos = self.parts[0].partition.derived
        found = memos.get(name)
        if found is None:
            found = memos[name] = build()
        return found

    def layers(self, name: str, build: Callable[[PackageView, ViewPart], T]) -> list[T]:
        """One index per partition in view, shared partition first, each built from its own
        documents and kept on its partition: every tenant view shares the shared layer (built
        from the shared view alone, so no tenant can shape it), and a tenant's layer is built
        once (its view is always the same two partitions). Lookups merge the layers."""
        found: list[T] = []
        for index, part in enumerate(self.parts):
            cache = part.partition.derived
            layer = cache.get(name)
            if layer is None:
                owner = self if index or self.shared_view is None else self.shared_view
                layer = cache[name] = build(owner, owner.parts[index])
            found.append(layer)
        return found

    async def load_exact(
        self, keys: Iterable[str]
    ) -> tuple[dict[str, list[ExactTarget]], ReadCost]:
        """What each folded exact key names in view (shared targets first), its chunks fetched
        concurrently in every partition in view (one round trip)."""
        wanted = sorted(set(keys))
        per_part, reads = await from_every_part(
            [part.partition.exact.targets(wanted) for part in self.parts]
        )
        found: dict[str, list[ExactTarget]] = {key: [] for key in wanted}
        for part, targets in zip(self.parts, per_part, strict=True):
            for key, local in targets.items():
                for kind, doc, section, fact in local:
                    where = None if section is None else part.first_section + section
                    found[key].append(ExactTarget(kind, part.first_doc + doc, where, fact))
        return found, reads

    def with_exact(self, found: Mapping[str, list[ExactTarget]]) -> PackageView:
        """This view with the exact keys of ``found`` resolvable (``exact_targets``)."""
        return dataclasses.replace(self, exact_found={**self.exact_found, **found})

    def exact_targets(self, key: str) -> list[ExactTarget]:
        """What a folded exact key names in view (shared targets first); the key must have been
        looked up for this query (``load_exact``)."""
        found = self.exact_found.get(key)
        if found is None:
            raise RecordNotLoaded(f"exact key {key!r} was not looked up for this query")
        return found

    @property
    def block_names(self) -> list[str]:
        """The posting blocks of this view (the same in every partition of a package)."""
        return list(self.parts[0].partition.postings.directory.blocks)

    def first_section(self, doc_index: int) -> int:
        return self.doc_first_section[doc_index]

    def doc_sections(self, doc_index: int) -> range:
        """The section indices of one document (they are contiguous)."""
        part = self.parts[part_of_doc(self.parts, doc_index)]
        local = doc_index - part.first_doc
        first = part.first_section
        return range(
            first + part.partition.columns.first[local],
            first + part.partition.columns.first[local + 1],
        )

    def doc_trust(self, doc_index: int) -> str:
        """A document's trust level, from the resident columns."""
        part = self.parts[part_of_doc(self.parts, doc_index)]
        return part.partition.columns.trust(doc_index - part.first_doc)

    # -- terms and postings of the partitions in view ------------------------------------------

    async def load_terms(
        self, terms: Iterable[str]
    ) -> tuple[dict[str, tuple[TermEntry | None, ...]], ReadCost]:
        """Each term's entry in every partition in view (None where it is not a term), its
        vocabulary chunks fetched concurrently (one round trip); terms already loaded for this
        query are not looked up again."""
        wanted = sorted(set(terms) - set(self.term_found))
        if not wanted:
            return {}, ReadCost(0, 0, 0, 0)
        per_part, reads = await from_every_part(
            [part.partition.vocabulary.entries(wanted) for part in self.parts]
        )
        return {term: tuple(entries[term] for entries in per_part) for term in wanted}, reads

    def with_terms(self, found: Mapping[str, tuple[TermEntry | None, ...]]) -> PackageView:
        """This view with the terms of ``found`` readable (``term_entries``)."""
        return dataclasses.replace(self, term_found={**self.term_found, **found})

    def term_entries(self, term: str) -> tuple[TermEntry | None, ...]:
        """The term's entry in each partition in view; it must have been loaded for this query
        (``load_terms``)."""
        found = self.term_found.get(term)
        if found is None:
            raise RecordNotLoaded(f"term {term!r} was not looked up for this query")
        return found

    def knows(self, term: str) -> bool:
        """Whether any document in view holds ``term`` (a term loaded for this query)."""
        return any(entry is not None for entry in self.term_entries(term))

    def may_know(self, term: str) -> bool:
        """False when no partition in view holds ``term`` (Bloom filters: no read); True may
        be wrong, and ``knows`` decides once the term is loaded."""
        return any(part.partition.vocabulary.may_hold(term) for part in self.parts)

    def document_frequency(self, term: str) -> int:
        """Sections in view holding a loaded term (the largest over posting blocks, summed;
        without tombstoned ones where a delta says)."""
        found = sum(entry.df for entry in self.term_entries(term) if entry is not None)
        dead = max((self.dead_frequency(term, b) for b in self.block_names), default=0)
        return max(0, found - dead)

    def posting_lists(
        self, term: str, block: str, loaded: Loaded | None = None
    ) -> list[tuple[Postings, int]]:
        """(postings, term id) of ``term`` in one block of each partition in view holding it;
        its shards must have been loaded (``load_postings``, whose ``shards`` are ``loaded``)."""
        found = []
        for part, entry in zip(self.parts, self.term_entries(term), strict=True):
            if entry is not None:
                found.append(part.partition.postings.postings(entry.id, block, loaded))
        return found

    async def load_postings(
        self,
        terms: Iterable[str],
        lease: ArenaLease | None = None,
        heads: Collection[str] = (),
    ) -> ShardReads:
        """Fetch (concurrently, one round trip) the shards holding ``terms`` (loaded for this
        query) that the isolate does not hold yet, in every partition in view; the large ones
        into ``lease``'s arena when the store can copy there (readable until the lease ends).
        A term in ``heads`` is read as its head page where its list has one (a long list:
        ``router.ranking.fetch_budget``)."""
        ids: list[list[int]] = [[] for _ in self.parts]
        pages: set[tuple[str, int]] = set()
        for term in set(terms):
            for index, entry in enumerate(self.term_entries(term)):
                if entry is not None:
                    ids[index].append(entry.id)
                    if term in heads:
                        pages.add((self.parts[index].partition.postings.key, entry.id))
        wanted = [(part.partition.postings, own) for part, own in zip(self.parts, ids, strict=True)]
        return await load_shards([(store, own) for store, own in wanted if own], lease, pages)

    def has_head_page(self, term: str) -> bool:
        """Whether a partition in view holds ``term``'s list with a head page (a long list)."""
        for part, entry in zip(self.parts, self.term_entries(term), strict=True):
            if entry is not None:
                store = part.partition.postings
                if store.directory.page_name(store.directory.shard_of(entry.id)) is not None:
                    return True
        return False

    def lease_arena(self) -> ArenaLease | None:
        """The package's shard arena for one query's postings, or None while another query
        of the isolate holds it; end it with ``end_lease`` once the query has scored."""
        return self.parts[0].partition.postings.cache.arena.lease()

    def end_lease(self, lease: ArenaLease | None) -> None:
        """Give the arena back: the query's arena shards are dead bytes now (None: no lease)."""
        if lease is not None:
            self.parts[0].partition.postings.cache.end_lease(lease)

    # -- typo repair's corpus words ------------------------------------------------------------

    async def look_up_words(
        self, keys: Iterable[str]
    ) -> tuple[dict[str, tuple[str | None, ...]], ReadCost]:
        """Each word-map key's value in every partition in view (``router.package.stores.words``),
        their chunks fetched concurrently (one round trip)."""
        wanted = sorted(set(keys))
        per_part, reads = await from_every_part(
            [part.partition.words.values(wanted) for part in self.parts]
        )
        return {key: tuple(values[key] for values in per_part) for key in wanted}, reads

    def may_hold_word(self, key: str) -> bool:
        """False when no partition in view holds the word-map ``key`` (Bloom filters)."""
        return any(part.partition.words.may_hold(key) for part in self.parts)

    # -- graph edges ----------------------------------------------------------------------------

    async def load_edges(
        self, sections: Iterable[int], strength: Mapping[str, float]
    ) -> tuple[dict[int, dict[int, str]], ReadCost]:
        """Target → relation of the edges leaving each section, over every partition in view
        (an edge two partitions hold keeps its relation with the larger ``strength``); their
        chunks fetched concurrently (one round trip). With a delta in view, an edge into an
        old copy leads to the new one, and a new copy keeps the edges other documents gave
        its old one (backlinks, children: docs/adr/0020)."""
        wanted = sorted(set(sections))
        origins = self.amended.origins
        asked = sorted(set(wanted) | {origins[s] for s in wanted if s in origins})
        per_part, reads = await from_every_part(
            [part.partition.graph.neighbours_of(asked) for part in self.parts]
        )
        merged: dict[int, dict[int, str]] = {s: {} for s in asked}
        for edges in per_part:
            for section, targets in edges.items():
                _merge_edges(merged[section], targets, strength)
        if not self.amended:
            return merged, reads
        return {s: self._amended_edges(s, merged, strength) for s in wanted}, reads

    def _amended_edges(
        self, section: int, merged: dict[int, dict[int, str]], strength: Mapping[str, float]
    ) -> dict[int, str]:
        """The edges of ``section`` through the deltas: targets redirected to their new copy;
        a new copy inherits its old one's edges from unchanged documents."""
        redirects, dead = self.amended.redirects, self.amended.documents
        found: dict[int, str] = {}
        for target, relation in merged[section].items():
            _merge_edges(found, {redirects.get(target, target): relation}, strength)
        old = self.amended.origins.get(section)
        if old is not None:
            inherited = {  # a changed document's own edges were compiled again in its delta
                t: r
                for t, r in merged[old].items()
                if r in INHERITED_RELATIONS and self.section_doc[t] not in dead
            }
            _merge_edges(found, inherited, strength)
        found.pop(section, None)
        return found

    @property
    def num_sections(self) -> int:
        """The view's section number space (with a delta in view, numbers in a gap between
        parts belong to no section)."""
        return len(self.section_doc)

    @property
    def section_total(self) -> int:
        """Live sections in view: BM25's N, without the sections a delta tombstones whose
        terms it subtracts from the document frequencies too (``dead_frequency``); a delta
        that could not say leaves both stale alike, within its bound (docs/adr/0020)."""
        total = sum(part.partition.section_count for part in self.parts)
        return total - self.amended.dead_sections

    def dead_frequency(self, term: str, block: str) -> int:
        """Tombstoned sections of the view that still count in ``term``'s postings of
        ``block`` (subtracted from its document frequency)."""
        return self.amended.dead_frequencies.get(block, {}).get(term, 0)

    # -- numbering ----------------------------------------------------------------------------

    def global_section(self, section: int) -> int:
        """The package-wide number of a view section (vector ids, D1 rows use it)."""
        part = self.parts[part_of_section(self.parts, section)]
        return part.first_global + section - part.partition.first_section

    def view_section(self, global_section: int) -> int | None:
        """The view number of a package-wide section, or None when it is not in view."""
        for part in self.parts:
            local = global_section - part.first_global
            if 0 <= local < part.partition.section_count:
                return part.partition.first_section + local
        return None


INHERITED_RELATIONS = frozenset({"backlink", "child"})
"""Edges another document gives a section (its links, its parent id): a changed document's new
copy keeps those of its old copy that come from unchanged documents."""


def _merge_edges(
    into: dict[int, str], targets: Mapping[int, str], strength: Mapping[str, float]
) -> None:
    """Add ``targets`` to ``into``, an edge both hold keeping the stronger relation."""
    for target, relation in targets.items():
        current = into.get(target)
        if current is None or strength[relation] > strength[current]:
            into[target] = relation
