"""A delta version in the stores (docs/adr/0020): it sends only its own files, rows and vectors,
reads its base's where the base published them, and ``kr gc`` never takes its base away."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from router.adapters.local.state import LocalState
from router.adapters.local.vector_index import LocalVectorIndex
from router.compile.build import build_knowledge
from router.compile.corpus import load_knowledge
from router.compile.delta import base_partitions, changes_since, compile_delta, placements
from router.compile.embedding import embed_sections
from router.compile.indexer import BuildConfig, CompiledPackage, compile_documents
from router.config import RouterConfig
from router.contract import QueryRequest
from router.ops.gc import collect, plan_gc
from router.ops.publish import MemoryJournal, PublishError, PublishTarget, publish, publish_direct
from router.package.version.content_names import is_lazy
from router.package.version.layout import version_prefix
from router.package.version.manifest import MANIFEST_NAME
from router.service import KnowledgeService
from router.vectors.hash_embedder import HashEmbedder
from tests.ops.conftest import Files, edit_tenant_doc, write_knowledge


class SeenRows:
    """A record row store that holds nothing and remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: set[tuple[str, str]] = set()

    async def read(self, version: str, partition: str, docs: Sequence[int]) -> dict[int, str]:
        self.asked.add((version, partition))
        return {}


def base_and_delta_of(
    folder: Path, embedder: HashEmbedder | None = None
) -> tuple[CompiledPackage, CompiledPackage, int]:
    """The full build of ``write_knowledge``'s folder, the delta of one edited tenant document
    (with vectors when ``embedder``), and that document's section count."""
    write_knowledge(folder)
    documents = load_knowledge(folder).documents
    vectors = embed_sections(documents, embedder) if embedder else None
    base = compile_documents(documents, BuildConfig(), (), {}, vectors)
    edit_tenant_doc(folder, "Texto novo sobre bombas hidráulicas e selos mecânicos.\n")
    changed = [d for d in load_knowledge(folder).documents if d.path == "acme/a1.md"]
    delta = compile_delta(
        base.manifest,
        {n: b for n, b in base.artifacts.items() if not is_lazy(n)},
        base_partitions(base, documents),
        changes_since(placements(base.manifest, documents), changed, []),
        BuildConfig(),
        embed_sections(changed, embedder) if embedder else None,
    )
    return base, delta, len(changed[0].sections)


@pytest.fixture(scope="module")
def base_and_delta(tmp_path_factory: pytest.TempPathFactory) -> tuple[Files, CompiledPackage]:
    base, delta, _ = base_and_delta_of(tmp_path_factory.mktemp("kb"))
    return base.files(), delta


def _publish(state: LocalState, files: Files) -> str:
    report = asyncio.run(publish_direct(files, state.blobs, state.kv, state.relational))
    return report.version


def test_a_delta_sends_its_own_files_and_rows_only(
    base_and_delta: tuple[Files, CompiledPackage], tmp_path: Path
) -> None:
    base_files, delta = base_and_delta
    state = LocalState(tmp_path / "s")
    base = _publish(state, base_files)
    report = asyncio.run(
        publish_direct({**base_files, **delta.files()}, state.blobs, state.kv, state.relational)
    )
    assert report.blobs_uploaded == len(delta.files())  # no base bundle, no base chunk
    assert report.bytes_uploaded == sum(len(b) for b in delta.files().values())
    assert not (
        state.root / "r2" / version_prefix(report.version) / "shared.partition.bin"
    ).exists()
    assert state.relational.count("documents", report.version) == 1  # the edited document
    assert state.relational.count("documents", base) == 123

    rows = SeenRows()
    service = KnowledgeService(kv=state.kv, blobs=state.blobs, record_rows=rows)
    response = asyncio.run(service.query(QueryRequest(query="selos mecânicos", tenant="acme")))
    assert response.results[0].doc_id == "acme.n1"
    assert response.knowledge_version == report.version
    asyncio.run(service.query(QueryRequest(query="caldeiras e válvulas", tenant="acme")))
    asyncio.run(service.query(QueryRequest(query="assunto7 procedimento")))
    assert (base, "shared") in rows.asked  # a base partition's records: its base's rows
    assert all(
        version == (report.version if partition.endswith("-d") else base)
        for version, partition in rows.asked
    )
    assert any(partition.endswith("-d") for _, partition in rows.asked)


def test_gc_keeps_the_base_of_a_kept_delta(
    base_and_delta: tuple[Files, CompiledPackage], tmp_path: Path
) -> None:
    base_files, delta = base_and_delta
    state = LocalState(tmp_path / "s")
    base = _publish(state, base_files)
    delta_version = _publish(state, {**base_files, **delta.files()})
    other = build_knowledge(Path(__file__).resolve().parents[2] / "knowledge").package.files()
    _publish(state, other)  # active: other, previous: the delta, neither is the base

    plan = asyncio.run(plan_gc(state.blobs, state.kv, state.relational, keep=0))
    assert base in plan.kept and base not in plan.dropped and base not in plan.rows
    asyncio.run(collect(plan, state.blobs, state.relational))
    loaded = asyncio.run(KnowledgeService(kv=state.kv, blobs=state.blobs).load(delta_version))
    assert loaded.version == delta_version
    assert state.relational.count("documents", base) == 123
    assert (state.root / "r2" / version_prefix(base) / MANIFEST_NAME).exists()


def test_a_delta_upserts_its_own_vectors_and_searches_its_bases_too(tmp_path: Path) -> None:
    embedder = HashEmbedder()
    base, delta, sections = base_and_delta_of(tmp_path / "kb", embedder)
    state = LocalState(tmp_path / "s")
    index = LocalVectorIndex(HashEmbedder.dimensions)
    target = PublishTarget("t", state.blobs, state.kv, state.relational, vectors=index)
    first = asyncio.run(publish(base.files(), target, MemoryJournal()))
    files = {**base.files(), **delta.files()}
    second = asyncio.run(publish(files, target, MemoryJournal()))
    assert first.vectors_upserted == base.manifest.counts["sections"]
    assert second.vectors_upserted == sections  # the new copy's only

    config = RouterConfig(always_vector=True)
    service = KnowledgeService(
        kv=state.kv, blobs=state.blobs, config=config, embedder=embedder, vector_index=index
    )
    seen = []
    for query, tenant in (("selos mecânicos bombas", "acme"), ("assunto7 termo", None)):
        response = asyncio.run(service.query(QueryRequest(query=query, tenant=tenant)))
        seen.append([section for section, _ in response.trace["stages"]["vector"]["matches"]])
    acme, shared = seen
    assert acme[0] == "acme.n1#interno-1" and acme.count(acme[0]) == 1  # the old copy hidden
    assert any(s.startswith("shared.") for s in acme)  # the base's vectors, under its version
    assert shared[0].startswith("shared.n7")


def test_a_delta_is_refused_where_its_base_was_never_published(
    base_and_delta: tuple[Files, CompiledPackage], tmp_path: Path
) -> None:
    base_files, delta = base_and_delta
    state = LocalState(tmp_path / "s")
    with pytest.raises(PublishError, match=r"publish .* there first"):
        _publish(state, {**base_files, **delta.files()})
    assert not asyncio.run(state.blobs.list_keys("packages/"))  # nothing was written
