"""Compiles documents into a knowledge package: per partition, analyzer + BM25 postings + catalog.

Why the work is here and not at run time: the saturated term frequencies of BM25 are computed
once at build time, so the Worker only multiplies them by the query's IDF and sums (docs/adr/0001,
0010). PyStemmer stems here and its output is checked against the pure-Python snowballstemmer used
at run time.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import Stemmer

from router.analysis.analyzer import Analyzer, AnalyzerConfig, snowball_stem_function
from router.analysis.surface import surface_tables, surface_texts, surface_word_stems
from router.analysis.text import fold, has_diacritics
from router.checks import check_choice, check_range, check_weights
from router.compile.fields import (
    CscBlock,
    SectionPostings,
    bm25_block,
    bm25f_block,
    section_fields,
    weighted_lengths,
)
from router.compile.spill import SpilledDocuments
from router.compile.staging import PackageFiles, StagedFiles
from router.errors import ConfigError
from router.knowledge.model import ALL_TENANTS, Document, Section
from router.knowledge.parser import strip_wikilinks
from router.package.format.bundle import BUNDLE_NAME, encode_bundle
from router.package.format.doc_columns import DOCS_NAME, encode_columns
from router.package.format.exact import encode_exact_chunks
from router.package.format.fields import BM25F_BLOCK, DEFAULT_FIELD_WEIGHTS, FIELD_NAMES
from router.package.format.graph import encode_graph_chunks, graph_edges
from router.package.format.keywords import filed_keywords
from router.package.format.records import encode_records, record_of
from router.package.format.shards import encode_shards
from router.package.format.string_map import encode_string_map
from router.package.format.texts import encode_texts
from router.package.format.vectors import encode_vectors
from router.package.format.vocabulary import encode_vocabulary
from router.package.format.words import encode_word_chunks
from router.package.version.content_names import is_lazy
from router.package.version.manifest import MANIFEST_NAME, VECTORS_NAME, Manifest, dumps_json
from router.package.version.partitions import PartitionEntry, partition_file, partition_key
from router.stages.graph import RELATION_WEIGHTS

__all__ = [
    "BM25Params",
    "BuildConfig",
    "CompiledPackage",
    "CompiledPartition",
    "LinkTargets",
    "SectionEmbeddings",
    "Targets",
    "block_frequencies",
    "check_stemmer_equality",
    "compile_documents",
    "compile_partition",
    "embedding_rows",
    "group_partitions",
    "link_targets",
    "partition_artifacts",
    "partition_vectors",
    "pystemmer",
    "section_index_text",
]


@dataclass(frozen=True)
class BM25Params:
    """BM25 variant and parameters given to bm25s (Lucene's IDF, the usual k1/b)."""

    method: str = "lucene"
    k1: float = 1.5
    b: float = 0.75

    def __post_init__(self) -> None:
        check_choice("BM25Params", "method", self.method, BM25_METHODS)
        check_range("BM25Params", "k1", self.k1, 0.0)
        check_range("BM25Params", "b", self.b, 0.0, 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "k1": self.k1, "b": self.b}


SCORING_MODES = ("fields", "bm25f")
# The bm25s variants whose score is zero where a term does not occur (BM25L and BM25+ are not:
# they would need a score for every section, which sparse posting lists cannot hold).
BM25_METHODS = ("lucene", "robertson", "atire")


@dataclass(frozen=True)
class BuildConfig:
    """Everything that shapes a package, with named defaults.

    ``scoring`` picks the posting layout (docs/adr/0005): "fields" keeps one block per weighted
    field (weights applied at query time), "bm25f" compiles one BM25F block with ``field_weights``.
    """

    analyzer: AnalyzerConfig = field(default_factory=AnalyzerConfig)
    bm25: BM25Params = field(default_factory=BM25Params)
    scoring: str = "bm25f"
    field_weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_FIELD_WEIGHTS))

    def __post_init__(self) -> None:
        check_choice("BuildConfig", "scoring", self.scoring, SCORING_MODES)
        check_weights("BuildConfig", "field_weights", self.field_weights, FIELD_NAMES)
        if not any(w > 0 for w in self.field_weights.values()):
            raise ConfigError("BuildConfig.field_weights needs at least one weight above 0")

    def index_dict(self, blocks: Sequence[str]) -> dict[str, Any]:
        weights = {k: float(self.field_weights.get(k, 0.0)) for k in FIELD_NAMES}
        return {"scoring": self.scoring, "blocks": list(blocks), "field_weights": weights}


@dataclass(frozen=True)
class SectionEmbeddings:
    """Section vectors computed by the build, in section order, and the model that made them."""

    model: str
    dimensions: int
    rows: Sequence[Sequence[float]]


@dataclass(frozen=True)
class CompiledPackage:
    """A built package: the manifest plus its artifacts by name (in memory, or staged in a
    folder: ``router.compile.staging``)."""

    manifest: Manifest
    artifacts: Mapping[str, bytes]
    partitions: dict[str, CompiledPartition] = field(default_factory=dict, repr=False)

    @property
    def knowledge_version(self) -> str:
        return self.manifest.knowledge_version

    def files(self) -> Mapping[str, bytes]:
        """Every file of the package, manifest included (staged ones read when asked)."""
        if isinstance(self.artifacts, StagedFiles):
            return PackageFiles(MANIFEST_NAME, self.manifest.to_bytes(), self.artifacts)
        return {MANIFEST_NAME: self.manifest.to_bytes(), **self.artifacts}


def section_index_text(doc: Document, section: Section, first: bool) -> str:
    """Every field of a section as one text (used for the accent lexicon and diagnostics)."""
    return _joined(section_fields(doc, section, first))


def _joined(fields: Mapping[str, str]) -> str:
    return "\n".join(t for t in fields.values() if t)


def compile_documents(
    documents: Sequence[Document],
    config: BuildConfig | None = None,
    synonyms: Sequence[Sequence[str]] = (),
    source: dict[str, Any] | None = None,
    embeddings: SectionEmbeddings | None = None,
    advance: Callable[[int], None] | None = None,
    store: StagedFiles | None = None,
) -> CompiledPackage:
    """Build the package; same documents, config and vectors → byte-identical artifacts;
    ``advance(n)`` after each partition, with its number of documents. With ``store`` the
    files are written there as they are made (each lazy file as soon as its encoder returns
    it), not held in memory.

    Documents are compiled per partition (the shared one, then one per tenant; docs/adr/0010):
    each partition has its own vocabulary, statistics, accent lexicon and typo words, so nothing
    of one tenant's documents reaches another tenant's queries.
    """
    config = config or BuildConfig()
    if not documents:
        raise ConfigError("no documents to index")
    rows = embedding_rows(documents, embeddings)
    check_stemmer_equality(
        Analyzer(config.analyzer).vocabulary_words(
            section_index_text(doc, section, index == 0)
            for doc in documents
            for index, section in enumerate(doc.sections)
        ),
        config.analyzer,
    )
    build_stem = pystemmer(config.analyzer.language)
    artifacts: MutableMapping[str, bytes] = {} if store is None else store
    compiled_partitions: dict[str, CompiledPartition] = {}
    entries: list[PartitionEntry] = []
    shared_lexicon: dict[str, str] = {}
    shared_targets: Targets = ({}, {})
    shared_sections = 0
    blocks: list[str] = []
    totals = Counter[str]()
    for tenant, members in group_partitions(documents):
        key = partition_key(tenant)
        first_section = shared_sections if entries else 0
        own_targets = link_targets(members, first_section)
        compiled = compile_partition(
            members,
            config,
            build_stem,
            shared_lexicon,
            LinkTargets((shared_targets, own_targets)),
            first_section,
            synonyms if not entries else (),
            partition_vectors(members, rows, embeddings),
            sink=None if store is None else _prefixed(store, key),
        )
        if advance is not None:
            advance(len(members))
        if not entries:
            shared_lexicon, shared_sections = compiled.lexicon, compiled.sections
            shared_targets = own_targets
        artifacts.update(partition_artifacts(key, compiled.files))
        compiled_partitions[key] = compiled if store is None else replace(compiled, files={})
        entries.append(PartitionEntry(key, tenant, len(members), compiled.sections, first_section))
        blocks = compiled.blocks
        totals.update(compiled.counts)
    embedding = None
    if embeddings is not None:
        embedding = {"model": embeddings.model, "dimensions": embeddings.dimensions}
    counts = {
        "documents": len(documents),
        **{k: totals[k] for k in ("sections", "terms", "postings")},
    }
    counts["partitions"] = len(entries)
    manifest = Manifest.create(
        {name: artifacts[name] for name in artifacts if not is_lazy(name)},
        config.analyzer.to_dict(),
        config.bm25.to_dict(),
        counts,
        source or {},
        index=config.index_dict(blocks),
        embedding=embedding,
        partitions=tuple(entries),
    )
    return CompiledPackage(manifest, artifacts, compiled_partitions)


def _prefixed(store: MutableMapping[str, bytes], key: str) -> Callable[[str, bytes], None]:
    """Writes a partition's file into ``store`` under its package name."""

    def put(name: str, blob: bytes) -> None:
        store[partition_file(key, name)] = blob

    return put


def partition_artifacts(key: str, files: Mapping[str, bytes]) -> dict[str, bytes]:
    """A compiled partition's package files: its resident ones bundled, the others apart."""
    resident = {
        name: blob for name, blob in files.items() if not is_lazy(name) and name != VECTORS_NAME
    }
    found = {partition_file(key, BUNDLE_NAME): encode_bundle(resident)}
    found.update((partition_file(key, n), blob) for n, blob in files.items() if n not in resident)
    return found


@dataclass(frozen=True)
class CompiledPartition:
    """One compiled partition: its files (unprefixed), accent lexicon, sizes, block names, and
    the average weighted length of each block (what a delta amending it normalises with)."""

    files: dict[str, bytes]
    lexicon: dict[str, str]
    sections: int
    blocks: list[str]
    counts: dict[str, int]
    averages: dict[str, float] = field(default_factory=dict)


def group_partitions(documents: Sequence[Document]) -> list[tuple[str, Sequence[Document]]]:
    """(tenant, its documents in input order): the shared partition first (even when empty, so
    an anonymous caller always has one), then the tenants in the order of their keys. Spilled
    documents (``router.compile.spill``) are grouped as views, read back when iterated."""
    groups: dict[str, list[int]] = {ALL_TENANTS: []}
    for index, doc in enumerate(documents):
        groups.setdefault(doc.tenant, []).append(index)
    tenants = sorted((t for t in groups if t != ALL_TENANTS), key=partition_key)

    def members(tenant: str) -> Sequence[Document]:
        if isinstance(documents, SpilledDocuments):
            return documents.select(groups[tenant])
        return [documents[index] for index in groups[tenant]]

    return [(tenant, members(tenant)) for tenant in [ALL_TENANTS, *tenants]]


def compile_partition(
    documents: Sequence[Document],
    config: BuildConfig,
    build_stem: Any,
    shared_lexicon: Mapping[str, str],
    links: LinkTargets,
    first_section: int,
    synonyms: Sequence[Sequence[str]],
    vectors: bytes | None,
    averages: Mapping[str, float] | None = None,
    sink: Callable[[str, bytes], None] | None = None,
) -> CompiledPartition:
    """A partition's files. A tenant partition analyses with its own accent lexicon under the
    shared one (shared spellings win), which is exactly the analyzer its queries get.
    ``links`` resolves its wikilinks and parent ids; ``averages`` (a delta's: its base's)
    replaces its own average lengths. ``sink(name, blob)`` takes each lazy file as soon as
    its encoder returns it (then not in ``files``): a partition's files are not held at once."""
    kept = _Kept(sink)
    lexicon = build_accent_lexicon(
        (_joined(f) for f in _section_fields(documents)), config.analyzer, build_stem
    )
    analyzer = Analyzer(
        config.analyzer, stem=build_stem, accent_lexicon={**lexicon, **shared_lexicon}
    )
    terms, vocabulary, blocks, used_averages, sections = _indexed(
        documents, analyzer, config, first_section, averages or {}
    )
    directory, shards, df = encode_shards(blocks, len(terms), first_section + sections)
    counts = {
        "sections": sections,
        "terms": len(terms),
        "postings": sum(len(block[1]) for block in blocks.values()),
    }
    names = list(blocks)
    del blocks  # the postings are in the shards now (a 1M build: ≈ 0.35 GB of arrays)
    shards = kept(shards)
    resolve = links.section
    files = {
        DOCS_NAME: encode_columns(documents),
        **kept(encode_records(_records(documents))),
        "synonyms.json": dumps_json([list(group) for group in synonyms]),
        **kept(
            encode_vocabulary(
                terms,
                df,
                filed_keywords(documents, analyzer.terms, vocabulary, first_section, resolve),
            )
        ),
        "lexicon.bin": encode_string_map(
            stored_lexicon(lexicon, shared_lexicon, Analyzer(config.analyzer, stem=build_stem))
        ),
        "postings.bin": directory,
        **kept(encode_exact_chunks(documents)),
        **kept(
            encode_graph_chunks(
                graph_edges(documents, first_section, resolve, links.document, RELATION_WEIGHTS)
            )
        ),
        **shards,
        **kept(
            _surface_files(
                analyzer, _surface_words(analyzer, documents, _bodies(documents), vocabulary)
            )
        ),
        **kept(encode_texts(_bodies(documents))),
    }
    if vectors is not None:
        files[VECTORS_NAME] = vectors
    return CompiledPartition(files, lexicon, sections, names, counts, used_averages)


class _Kept:
    """What a partition keeps of an encoder's files: all of them, or (with a sink) the
    resident ones, each lazy file handed to the sink at once."""

    def __init__(self, sink: Callable[[str, bytes], None] | None) -> None:
        self._sink = sink

    def __call__(self, files: Mapping[str, bytes]) -> dict[str, bytes]:
        if self._sink is None:
            return dict(files)
        resident = {}
        for name, blob in files.items():
            if is_lazy(name):
                self._sink(name, blob)
            else:
                resident[name] = blob
        return resident


def _bodies(documents: Iterable[Document]) -> Iterator[str]:
    """Each section's body as indexed and quoted (wikilinks as their labels), in order."""
    return (strip_wikilinks(section.text) for doc in documents for section in doc.sections)


def _indexed(
    documents: Sequence[Document],
    analyzer: Analyzer,
    config: BuildConfig,
    first_section: int,
    averages: Mapping[str, float],
) -> tuple[list[str], dict[str, int], dict[str, CscBlock], dict[str, float], int]:
    """The sorted terms, term → id, the posting blocks, the average length each block was
    normalised with, and the number of sections. BM25F (the default) is collected one section
    at a time (``SectionPostings``: no partition's token lists held at once); per-field
    scoring keeps every field's token lists, as its blocks need them."""
    if config.scoring == "bm25f":
        collected = SectionPostings(config.field_weights)
        collected.add_all(_tokens(fields, analyzer) for fields in _section_fields(documents))
        terms = collected.sorted_terms()
        average = averages.get(BM25F_BLOCK)
        if average is None:
            average = collected.average()
        block = collected.block(config.bm25, first_section, average)
        used = {BM25F_BLOCK: average}
        return terms, collected.ids, {BM25F_BLOCK: block}, used, collected.sections
    field_tokens = _field_tokens(list(_section_fields(documents)), analyzer)
    terms = _vocabulary_of(field_tokens)
    vocabulary = {term: i for i, term in enumerate(terms)}
    blocks, used = _posting_blocks(field_tokens, vocabulary, config, first_section, averages)
    return terms, vocabulary, blocks, used, len(field_tokens[FIELD_NAMES[0]])


def _tokens(fields: Mapping[str, str], analyzer: Analyzer) -> dict[str, list[str]]:
    """One section's terms per field, every field in ``FIELD_NAMES`` order."""
    return {name: analyzer.terms(fields[name]) if fields[name] else [] for name in FIELD_NAMES}


def block_frequencies(
    documents: Sequence[Document], analyzer: Analyzer, config: BuildConfig
) -> dict[str, dict[str, int]]:
    """Per posting block and term, the sections of ``documents`` holding it — what they add to
    a partition's document frequencies when ``analyzer`` is that partition's (a delta subtracts
    its old copies' at query time, docs/adr/0020). Counted by the postings code itself."""
    if not documents:
        return {}
    field_tokens = _field_tokens(list(_section_fields(documents)), analyzer)
    terms = _vocabulary_of(field_tokens)
    vocabulary = {term: i for i, term in enumerate(terms)}
    blocks, _ = _posting_blocks(field_tokens, vocabulary, config, 0, {})
    return {
        name: {
            term: indptr[i + 1] - indptr[i]
            for i, term in enumerate(terms)
            if indptr[i + 1] > indptr[i]
        }
        for name, (indptr, _, _) in blocks.items()
    }


def _section_fields(documents: Iterable[Document]) -> Iterator[dict[str, str]]:
    """Each section's field texts, in section order, one at a time."""
    return (
        section_fields(doc, section, index == 0)
        for doc in documents
        for index, section in enumerate(doc.sections)
    )


def _field_tokens(
    fields: Sequence[Mapping[str, str]], analyzer: Analyzer
) -> dict[str, list[list[str]]]:
    """Each field's terms per section (every field, so that all partitions have the same)."""
    return {
        name: [analyzer.terms(f[name]) if f[name] else [] for f in fields] for name in FIELD_NAMES
    }


def _vocabulary_of(field_tokens: Mapping[str, Sequence[Sequence[str]]]) -> list[str]:
    """The sorted terms of ``field_tokens`` (term id = rank)."""
    return sorted({t for tokens in field_tokens.values() for ts in tokens for t in ts})


Targets = tuple[Mapping[str, int], Mapping[str, int]]
"""(section id → view section, semantic id → its first view section) of one partition."""


def link_targets(documents: Sequence[Document], first_section: int) -> Targets:
    sections: dict[str, int] = {}
    docs: dict[str, int] = {}
    number = first_section
    for doc in documents:  # an id used twice (two versions of a rule) names the later one
        docs[doc.semantic_id] = number
        for section in doc.sections:
            sections[section.section_id] = number
            number += 1
    return sections, docs


@dataclass(frozen=True)
class LinkTargets:
    """What a partition's wikilinks and parent ids resolve to, in view sections: the targets
    of the partitions in view, the first holding an id winning (the shared one for a full
    build's tenant partition — what a query's view resolves too; a delta's own first)."""

    layers: tuple[Targets, ...]

    def section(self, target: str) -> int | None:
        """A section id (first layer holding it), else a document's first section."""
        for sections, _ in self.layers:
            if target in sections:
                return sections[target]
        return self.document(target)

    def document(self, semantic_id: str) -> int | None:
        """The first view section of a document named by its semantic id."""
        for _, docs in self.layers:
            if semantic_id in docs:
                return docs[semantic_id]
        return None


def embedding_rows(
    documents: Sequence[Document], embeddings: SectionEmbeddings | None
) -> dict[int, Sequence[Sequence[float]]] | None:
    """Each document's section vectors (by ``id(doc)``), cut from the rows in input order."""
    if embeddings is None:
        return None
    total = sum(len(doc.sections) for doc in documents)
    if len(embeddings.rows) != total:
        raise ConfigError(f"{len(embeddings.rows)} vectors for {total} sections")
    rows: dict[int, Sequence[Sequence[float]]] = {}
    start = 0
    for doc in documents:
        rows[id(doc)] = embeddings.rows[start : start + len(doc.sections)]
        start += len(doc.sections)
    return rows


def partition_vectors(
    members: Sequence[Document],
    rows: dict[int, Sequence[Sequence[float]]] | None,
    embeddings: SectionEmbeddings | None,
) -> bytes | None:
    """``vectors.bin`` of one partition: its documents' section vectors, in partition order."""
    if rows is None or embeddings is None:
        return None
    flat = [row for doc in members for row in rows[id(doc)]]
    return encode_vectors(flat, embeddings.dimensions)


def _posting_blocks(
    field_tokens: dict[str, list[list[str]]],
    vocabulary: dict[str, int],
    config: BuildConfig,
    first_section: int,
    averages: Mapping[str, float],
) -> tuple[dict[str, CscBlock], dict[str, float]]:
    """One block per field (every field, so that all partitions have the same blocks), or the
    single BM25F block; and the average length each was normalised with (``averages``' where
    given, else the sections' own)."""
    if config.scoring == "bm25f":
        average = averages.get(BM25F_BLOCK)
        if average is None:
            average = weighted_lengths(field_tokens, config.field_weights)[1]
        block = bm25f_block(
            field_tokens, config.field_weights, vocabulary, config.bm25, first_section, average
        )
        return {BM25F_BLOCK: block}, {BM25F_BLOCK: average}
    blocks: dict[str, CscBlock] = {}
    used: dict[str, float] = {}
    for name, tokens in field_tokens.items():
        average = averages.get(name)
        if average is None:
            average = weighted_lengths({name: tokens}, {name: 1.0})[1]
        blocks[name] = bm25_block(tokens, vocabulary, config.bm25, first_section, average)
        used[name] = average
    return blocks, used


def build_accent_lexicon(texts: Iterable[str], config: AnalyzerConfig, stem: Any) -> dict[str, str]:
    """Map each accent-stripped word form to the stem of its accented spelling in the corpus.

    ``permissao`` (typed without accents) → stem of ``permissão``; the most frequent accented
    spelling wins when two fold alike, ties broken alphabetically for reproducibility.
    """
    plain = Analyzer(config, stem=stem)
    counts: Counter[str] = Counter()
    for text in texts:
        for word in plain.vocabulary_words([text]):
            if has_diacritics(word):
                counts[word] += 1
    best: dict[str, tuple[int, str]] = {}
    for word, count in counts.items():
        folded = fold(word)
        current = best.get(folded)
        if current is None or (-count, word) < (-current[0], current[1]):
            best[folded] = (count, word)
    return {folded: plain.surface_stem(word) for folded, (_, word) in sorted(best.items())}


def stored_lexicon(
    lexicon: Mapping[str, str], shared: Mapping[str, str], plain: Analyzer
) -> dict[str, str]:
    """The entries of a partition's accent lexicon that a query's analyzer needs: those whose
    stem differs from the one the plain word gets without them (73 % of the entries at 1M
    synthetic sections gave the same stem: 1.5 of the shared bundle's 8.6 MB), and for a tenant
    partition not those the shared lexicon holds (its spellings win in a tenant's view, and its
    own entry says what the dropped one would have). ``plain`` is an analyzer without lexicon."""
    return {
        folded: stem
        for folded, stem in lexicon.items()
        if folded not in shared and plain.surface_stem(folded) != stem
    }


def check_stemmer_equality(words: Iterable[str], config: AnalyzerConfig) -> None:
    """PyStemmer (build) and snowballstemmer (Worker) must agree on every word, or fail."""
    build = Analyzer(config, stem=pystemmer(config.language))
    runtime = Analyzer(config, stem=snowball_stem_function(config.language))
    differing = sorted(w for w in words if build.surface_stem(w) != runtime.surface_stem(w))
    if differing:
        sample = ", ".join(differing[:10])
        raise ConfigError(
            f"PyStemmer and snowballstemmer differ on {len(differing)} words: {sample}"
        )


def pystemmer(language: str) -> Any:
    try:
        return Stemmer.Stemmer(language).stemWord
    except KeyError as exc:
        raise ConfigError(f"PyStemmer has no stemmer for {language!r}") from exc


def _surface_files(analyzer: Analyzer, pairs: Sequence[Sequence[str]]) -> dict[str, bytes]:
    """``words.bin`` and its chunks: folded word → term, and sound key → words."""
    by_sound = analyzer.config.language == "portuguese"
    stem_of, sounds = surface_tables(((word, stem) for word, stem in pairs), by_sound)
    return encode_word_chunks(stem_of, sounds)


def _surface_words(
    analyzer: Analyzer,
    documents: Sequence[Document],
    bodies: Iterable[str],
    vocabulary: dict[str, int],
) -> list[list[str]]:
    """The typo repair's (word, term) pairs: names of things first, then bodies to a budget."""
    names = [f"{d.title} {' '.join(d.keywords)} {' '.join(d.aliases)}" for d in documents]
    names += [section.heading for doc in documents for section in doc.sections]
    texts = surface_texts(names, bodies)
    return [[word, stem] for word, stem in surface_word_stems(analyzer, texts, vocabulary)]


def _records(documents: Iterable[Document]) -> Iterator[dict[str, Any]]:
    """Each document's record (``records.bin``): its fields and sections, without the texts
    (``texts.bin``), with the injection flags the parser set on the document and its sections
    (``router.safety.fields``); one at a time."""
    for doc in documents:
        flags = [section.flags for section in doc.sections]
        metadata = json.loads(json.dumps(doc.metadata, default=str))
        yield record_of(doc, flags, metadata)
