"""Decoder of a knowledge package into the read-only structures the runtime queries.

Why verify on load: the blob store may hold a partial upload or a corrupted object; every
artifact is checked against the manifest's sha256 before anything is decoded, so a bad package is
refused as a whole and the previously loaded version keeps serving.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from router.analysis.analyzer import Analyzer, AnalyzerConfig
from router.analysis.text import fold
from router.errors import PackageFormatError
from router.knowledge.model import Document, Link, Section
from router.package.manifest import VECTORS_NAME, Manifest
from router.package.postings import Postings, decode_blocks
from router.package.text_store import DEFAULT_TEXT_CACHE_BYTES, ChunkFetcher, SectionTexts
from router.package.texts import TEXTS_INDEX_NAME, decode_text_index
from router.package.vectors import SectionVectors, decode_vectors

__all__ = ["ExactTarget", "KnowledgePackage", "load_package"]

ArtifactFetcher = Callable[[str], bytes]


@dataclass(frozen=True)
class ExactTarget:
    """What an exact key resolves to: a document, a section or a fact of a document."""

    kind: str  # "document" | "section" | "alias" | "title" | "fact"
    doc_index: int
    section_index: int | None = None
    fact: str | None = None


@dataclass
class KnowledgePackage:
    """One loaded knowledge version: documents, sections, postings, analyzer, exact keys."""

    manifest: Manifest
    documents: list[Document]
    section_doc: list[int]
    sections: list[Section]
    term_ids: dict[str, int]
    blocks: dict[str, Postings]  # field name (or "bm25f") → posting block
    analyzer: Analyzer
    texts: SectionTexts
    surface_words: list[tuple[str, str]] = field(default_factory=list)  # (word, term), typo repair
    vectors: SectionVectors | None = None
    synonyms: list[list[str]] = field(default_factory=list)
    exact: dict[str, list[ExactTarget]] = field(default_factory=dict)
    byte_size: int = 0
    impact_bounds: dict[tuple[int, int], float] = field(default_factory=dict)  # memoised maxima
    visible_docs: dict[Any, frozenset[int]] = field(default_factory=dict)  # filter → doc indices
    derived: dict[str, Any] = field(default_factory=dict)  # indexes built at first use

    def derive(self, name: str, build: Callable[[KnowledgePackage], Any]) -> Any:
        """An index derived from this package (keyword, graph, fuzzy...), built once, lazily."""
        found = self.derived.get(name)
        if found is None:
            found = self.derived[name] = build(self)
        return found

    @property
    def version(self) -> str:
        return self.manifest.knowledge_version

    @property
    def embedding_model(self) -> str | None:
        return self.manifest.embedding.get("model") if self.manifest.embedding else None

    def first_section(self, doc_index: int) -> int:
        return self._doc_first_section[doc_index]

    def doc_sections(self, doc_index: int) -> range:
        """The section indices of one document (they are contiguous)."""
        first = self._doc_first_section[doc_index]
        return range(first, first + len(self.documents[doc_index].sections))

    def __post_init__(self) -> None:
        self._doc_first_section: list[int] = []
        seen: set[int] = set()
        for section_index, doc_index in enumerate(self.section_doc):
            if doc_index not in seen:
                seen.add(doc_index)
                self._doc_first_section.append(section_index)
        if not self.exact:
            self.exact = _exact_keys(self)


def load_package(
    manifest_blob: bytes,
    fetch: ArtifactFetcher,
    *,
    with_vectors: bool = True,
    fetch_chunk: ChunkFetcher | None = None,
    text_cache_bytes: int = DEFAULT_TEXT_CACHE_BYTES,
) -> KnowledgePackage:
    """Verify and decode a package; ``fetch(name)`` returns an artifact's bytes.

    ``with_vectors=False`` leaves ``vectors.bin`` unread: a server whose vector index is remote
    (Vectorize) never needs the section vectors in memory (SciFact's are 8 MB of the isolate).
    Section texts are never decoded here: their chunks are read when a query quotes them, with
    ``fetch_chunk`` (async; e.g. an R2 read) or else with ``fetch``, and verified on arrival.
    """
    manifest = Manifest.from_bytes(manifest_blob)
    blobs = {
        name: manifest.verify(name, fetch(name))
        for name in manifest.names_to_read(with_vectors=with_vectors)
    }
    try:
        catalog = json.loads(blobs["catalog.json"])
        terms = json.loads(blobs["terms.json"])
        lexicon = json.loads(blobs["lexicon.json"])
        surface = [(str(word), str(stem)) for word, stem in json.loads(blobs["surface.json"])]
    except (ValueError, TypeError) as exc:
        raise PackageFormatError(f"package JSON is malformed: {exc}") from exc
    blocks = decode_blocks(blobs["postings.bin"])
    documents, sections, section_doc = _decode_catalog(catalog)
    if not blocks or any(
        p.num_sections != len(sections) or p.num_terms != len(terms) for p in blocks.values()
    ):
        raise PackageFormatError("postings.bin does not match the catalog and term list")
    vectors = decode_vectors(blobs[VECTORS_NAME]) if VECTORS_NAME in blobs else None
    if vectors is not None and (
        vectors.count != len(sections)
        or manifest.embedding is None
        or vectors.dimensions != int(manifest.embedding.get("dimensions", -1))
    ):
        raise PackageFormatError("vectors.bin does not match the sections or the manifest")
    analyzer = Analyzer(AnalyzerConfig.from_dict(manifest.analyzer), accent_lexicon=lexicon)
    text_index = decode_text_index(blobs[TEXTS_INDEX_NAME])
    if text_index.sections != len(sections):
        raise PackageFormatError("texts.bin does not match the catalog's sections")
    if any(name not in manifest.artifacts for name in text_index.chunk_names()):
        raise PackageFormatError("manifest lists fewer text chunks than texts.bin")
    return KnowledgePackage(
        manifest=manifest,
        documents=documents,
        section_doc=section_doc,
        sections=sections,
        term_ids={term: index for index, term in enumerate(terms)},
        blocks=blocks,
        analyzer=analyzer,
        texts=SectionTexts(
            text_index, _chunk_reader(manifest, fetch, fetch_chunk), text_cache_bytes
        ),
        surface_words=surface,
        vectors=vectors,
        synonyms=[list(g) for g in catalog.get("synonyms", [])],
        byte_size=sum(len(b) for b in blobs.values()) + len(manifest_blob),
    )


def _chunk_reader(
    manifest: Manifest, fetch: ArtifactFetcher, fetch_chunk: ChunkFetcher | None
) -> ChunkFetcher:
    """Reads one text chunk and checks it against the manifest before anyone uses it."""

    async def read(name: str) -> bytes:
        blob = await fetch_chunk(name) if fetch_chunk is not None else fetch(name)
        return manifest.verify(name, blob)

    return read


def _decode_catalog(catalog: dict[str, Any]) -> tuple[list[Document], list[Section], list[int]]:
    try:
        sections = [
            Section(
                section_id=s["id"],
                heading=s["heading"],
                level=s["level"],
                text="",  # read lazily: KnowledgePackage.texts
                line=s["line"],
                explicit_id=s["explicit"],
                links=[Link(s["id"], target, label, s["line"]) for target, label in s["links"]],
                flags=list(s["flags"]),
            )
            for s in catalog["sections"]
        ]
        section_doc = [int(s["doc"]) for s in catalog["sections"]]
        documents = []
        for d in catalog["documents"]:
            first, end = d["sections"]
            documents.append(
                Document(
                    semantic_id=d["id"],
                    title=d["title"],
                    path=d["path"],
                    description=d["description"],
                    keywords=d["keywords"],
                    aliases=d["aliases"],
                    tenant=d["tenant"],
                    trust=d["trust"],
                    status=d["status"],
                    version=d["version"],
                    created_at=d["created_at"],
                    updated_at=d["updated_at"],
                    valid_from=d["valid_from"],
                    valid_until=d["valid_until"],
                    scope=d["scope"],
                    facts=d["facts"],
                    metadata=d["metadata"],
                    sections=sections[first:end],
                )
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise PackageFormatError(f"catalog.json is malformed: {exc!r}") from exc
    return documents, sections, section_doc


def _exact_keys(package: KnowledgePackage) -> dict[str, list[ExactTarget]]:
    """Folded id / section id / alias / title / fact address → targets (case-insensitive)."""
    keys: dict[str, list[ExactTarget]] = {}

    def add(key: str, target: ExactTarget) -> None:
        keys.setdefault(fold(key).strip(), []).append(target)

    for doc_index, doc in enumerate(package.documents):
        add(doc.semantic_id, ExactTarget("document", doc_index))
        add(doc.title, ExactTarget("title", doc_index))
        for alias in doc.aliases:
            add(alias, ExactTarget("alias", doc_index))
        for name in doc.facts:
            add(f"{doc.semantic_id}.{name}", ExactTarget("fact", doc_index, fact=name))
    for section_index, section in enumerate(package.sections):
        add(
            section.section_id,
            ExactTarget("section", package.section_doc[section_index], section_index),
        )
    return keys
