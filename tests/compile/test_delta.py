"""Incremental compile (docs/adr/0020): a base left untouched plus delta partitions answers as a
full rebuild of the same folder does — the same top-10 on the golden set — and a changed or
removed document's old copy is gone from every stage."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest

from kr.golden import load_golden
from router.compile.corpus import load_knowledge
from router.compile.delta import base_partitions, changes_since, compile_delta, placements
from router.compile.indexer import BuildConfig, CompiledPackage, compile_documents
from router.contract import QueryRequest, QueryResponse
from router.errors import ConfigError, PackageFormatError
from router.knowledge.model import Document
from router.package.format.fields import DEFAULT_FIELD_WEIGHTS
from router.package.reader import KnowledgePackage, load_package
from router.package.version.content_names import is_lazy
from router.package.version.partitions import partition_key
from router.pipeline import run_query
from router.ranking import numpy_backend
from router.ranking.bm25 import block_weights, query_lists
from router.ranking.numpy_backend import PostingArrays, numpy_terms_top_k
from router.ranking.pruning import weighted_top_k
from router.stages.graph import RELATION_WEIGHTS
from router.sync import run_sync
from tests.common import (
    ALFA,
    GOLDEN,
    KNOWLEDGE,
    TODAY,
    load_all_postings,
    with_all_records,
    with_terms,
    write_doc,
)

EDITED = "apr/validade.md"
REMOVED = "epi/troca.md"
TENANT_EDITED = "tenants/construtora-alfa/andaimes.md"
ADDED_DOC = """---
semanticId: epi.luvasIsolantes
title: Luvas isolantes de borracha
tenant: "*"
keywords: [luvas isolantes, classe de tensão]
---
# Luvas isolantes de borracha

As luvas isolantes de borracha protegem contra choque elétrico. Antes de cada uso, faça o teste
de inflagem e confira a classe de tensão. Veja [[epi]] e [[apr]].
"""
EDIT = "\n\nNota de campo: o guarda-corpo telescópico exige inspeção diária antes da APR.\n"


def _docs(folder: Path) -> list[Document]:
    corpus = load_knowledge(folder)
    assert not corpus.errors
    return corpus.documents


def _load(*packages: CompiledPackage) -> KnowledgePackage:
    files: dict[str, bytes] = {}
    for package in packages:
        files.update(package.files())
    return load_package(files["manifest.json"], files.__getitem__)


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, KnowledgePackage]:
    folder = tmp_path_factory.mktemp("knowledge") / "k"
    shutil.copytree(KNOWLEDGE, folder)
    config = BuildConfig()
    base_docs = _docs(folder)
    base = compile_documents(base_docs, config)
    (folder / EDITED).write_text((folder / EDITED).read_text() + EDIT, encoding="utf-8")
    (folder / TENANT_EDITED).write_text(
        (folder / TENANT_EDITED).read_text() + EDIT, encoding="utf-8"
    )
    (folder / REMOVED).unlink()
    write_doc(folder / "epi", "luvas.md", ADDED_DOC)
    docs = _docs(folder)
    changed = [d for d in docs if d.path in (EDITED, TENANT_EDITED, "epi/luvas.md")]
    resident = {n: b for n, b in base.artifacts.items() if not is_lazy(n)}
    delta = compile_delta(
        base.manifest,
        resident,
        base_partitions(base, base_docs),
        changes_since(
            placements(base.manifest, base_docs),
            changed,
            [REMOVED],
            {doc.path: doc for doc in base_docs},
        ),
        config,
    )
    return {
        "delta": _load(base, delta),
        "full": _load(compile_documents(docs, config)),
        "base": _load(base),
    }


def _ask(package: KnowledgePackage, request: QueryRequest) -> QueryResponse:
    return run_query(package, request, today=TODAY)


def _top(response: QueryResponse) -> list[tuple[str, str]]:
    return [(r.doc_id, r.section_id) for r in response.results[:10]]


def test_the_delta_adds_partitions_and_rewrites_no_base_file(
    versions: Mapping[str, KnowledgePackage],
) -> None:
    base, delta = versions["base"].manifest, versions["delta"].manifest
    assert [e.key for e in delta.partitions[: len(base.partitions)]] == [
        e.key for e in base.partitions
    ]
    amended = {e.amends for e in delta.partitions if e.amends}
    assert amended == {"shared", partition_key(ALFA)}
    for name, entry in base.artifacts.items():  # named where the base stored them
        assert delta.artifacts[name] == {**entry, "home": base.knowledge_version}
        assert delta.home(name) == base.knowledge_version
    own = [n for n in delta.artifacts if n not in base.artifacts]
    assert own and all(delta.home(n) == delta.knowledge_version for n in own)
    assert delta.knowledge_version != base.knowledge_version


def test_golden_answers_equal_a_full_rebuilds(versions: Mapping[str, KnowledgePackage]) -> None:
    """The documented tolerance (docs/adr/0020): N and the document frequencies are exact (the
    old copies' counts are subtracted), the base's average lengths are stale by the change,
    which reorders near ties only. On this small base the three changes are ~3 % of its
    sections, the most the bound allows: the first result is the full rebuild's for every
    golden query, every top-10 shares at least nine sections with it, and at least 98 % are the
    same set."""
    golden = load_golden(GOLDEN)
    same_sets = 0
    for query in golden:
        delta = _top(_ask(versions["delta"], query.request))
        full = _top(_ask(versions["full"], query.request))
        assert delta[:1] == full[:1], query.id
        assert len(set(delta) & set(full)) >= min(len(full), 9), query.id
        same_sets += set(delta) == set(full)
    assert same_sets >= 0.98 * len(golden)


def test_the_old_copies_leave_the_statistics(versions: Mapping[str, KnowledgePackage]) -> None:
    """N and every document frequency of the delta's view are the full rebuild's."""
    delta, full = (versions[name].view(None) for name in ("delta", "full"))
    assert delta.section_total == full.section_total
    terms = full.analyzer.terms("APR validade guarda-corpo telescópico troca EPI inspeção luvas")
    delta, full = with_terms(delta, terms), with_terms(full, terms)
    assert all(full.document_frequency(term) for term in terms)
    for term in terms:
        assert delta.document_frequency(term) == full.document_frequency(term), term


def test_the_numpy_scorer_weighs_terms_as_the_delta_view_does(
    versions: Mapping[str, KnowledgePackage], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In CPython the lexical stage finds a query's lists through the view's plans (their IDF
    kept per view): over a delta's views, whose old copies leave the document frequencies, the
    ranking is the pure scorer's over ``query_lists``, floats included."""
    monkeypatch.setattr(numpy_backend, "NUMPY_MIN_POSTINGS", 1)  # the sample's queries are small
    golden = load_golden(GOLDEN)
    dead = 0
    for tenant in (None, ALFA):
        view = load_all_postings(versions["delta"].view(tenant))
        weights = block_weights(view.block_names, DEFAULT_FIELD_WEIGHTS)
        arrays = PostingArrays()
        for g in golden:
            asked = with_terms(view, view.analyzer.terms(g.request.query))
            terms = [t for t in view.analyzer.terms(g.request.query) if asked.knows(t)]
            dead += any(view.dead_frequency(t, b) for t in terms for b in weights)
            ours = numpy_terms_top_k(asked, terms, weights, "lucene", 10, arrays=arrays)
            pure = weighted_top_k(query_lists(asked, terms, weights, "lucene"), 10)
            assert ours.ranked == pure.ranked, g.request.query
    assert dead  # some queries ask terms whose old copies the delta subtracts


def test_an_edit_is_found_and_the_old_copy_is_gone(
    versions: Mapping[str, KnowledgePackage],
) -> None:
    request = QueryRequest(query="guarda-corpo telescópico inspeção diária")
    for name in ("delta", "full"):
        top = _ask(versions[name], request).results[0]
        assert top.doc_id == "apr.validity"
    ids = [(r.doc_id, r.section_id) for r in _ask(versions["delta"], request).results]
    assert len(ids) == len(set(ids))  # one copy of the edited document, not two
    alfa = _ask(versions["delta"], QueryRequest(query="guarda-corpo telescópico", tenant=ALFA))
    assert alfa.results[0].doc_id.startswith("construtoraAlfa")
    assert _ask(versions["base"], request).results[0].doc_id != "apr.validity"


def test_a_removed_document_disappears_and_an_added_one_appears(
    versions: Mapping[str, KnowledgePackage],
) -> None:
    removed_id = "epi.replacement"  # the id of REMOVED
    asked = ("troca de EPI", "quando trocar o EPI", removed_id)
    before = _ask(versions["base"], QueryRequest(query=removed_id))
    assert before.results[0].doc_id == removed_id
    for name in ("delta", "full"):
        package = versions[name]
        for query in asked:
            response = _ask(package, QueryRequest(query=query))
            assert all(r.doc_id != removed_id for r in response.results)
        added = _ask(package, QueryRequest(query="epi.luvasIsolantes"))
        assert added.results[0].doc_id == "epi.luvasIsolantes"


def test_the_graph_of_the_delta_is_the_full_rebuilds(
    versions: Mapping[str, KnowledgePackage],
) -> None:
    """Every edge of every live section, by ids: links into the edited document from unchanged
    ones reach its new copy, its backlinks survive, the removed one has none."""
    assert _edges_by_id(versions["delta"]) == _edges_by_id(versions["full"])


def _edges_by_id(package: KnowledgePackage) -> set[tuple[str, str, str]]:
    view = with_all_records(package.view(None))
    dead = view.amended.documents
    live = [s for d in range(view.doc_count) if d not in dead for s in view.doc_sections(d)]
    edges, _ = run_sync(view.load_edges(live, RELATION_WEIGHTS))
    ids = {s: view.sections[s].section_id for s in live}
    return {
        (ids[s], ids[t], relation)
        for s, targets in edges.items()
        for t, relation in targets.items()
        if t in ids
    }


def test_a_delta_of_a_delta_is_refused(versions: Mapping[str, KnowledgePackage]) -> None:
    delta = versions["delta"].manifest
    with pytest.raises(ConfigError, match="full"):
        compile_delta(delta, {}, {}, changes_since({}, [], []), BuildConfig())


def test_a_tombstone_past_its_base_is_refused(versions: Mapping[str, KnowledgePackage]) -> None:
    package = versions["delta"]
    delta = next(p for p in package.partitions if p.amendments is not None)
    assert delta.amendments is not None
    broken = type(delta.amendments)([10_000], [], [])
    delta.amendments, saved = broken, delta.amendments
    try:
        package._views.clear()
        with pytest.raises(PackageFormatError, match="tombstones"):
            package.view(None)
    finally:
        delta.amendments = saved
        package._views.clear()


def test_a_delta_that_only_adds_is_seen_across_the_numbering_gap(tmp_path: Path) -> None:
    """The shared delta is numbered after the largest tenant's range: an anonymous view has a
    gap between its two parts and no tombstone, and must still see both."""
    folder = tmp_path / "k"
    shutil.copytree(KNOWLEDGE, folder)
    base_docs = _docs(folder)
    base = compile_documents(base_docs, BuildConfig())
    write_doc(folder / "epi", "luvas.md", ADDED_DOC)
    added = [d for d in _docs(folder) if d.path == "epi/luvas.md"]
    delta = compile_delta(
        base.manifest,
        {n: b for n, b in base.artifacts.items() if not is_lazy(n)},
        base_partitions(base, base_docs),
        changes_since(placements(base.manifest, base_docs), added, []),
        BuildConfig(),
    )
    package = _load(base, delta)
    shared_delta = package.manifest.partitions[-1]
    assert shared_delta.amends == "shared"
    assert shared_delta.first_section > package.manifest.partitions[0].sections  # a gap
    for query, expected in (("luvas isolantes inflagem", "epi.luvasIsolantes"), ("apr", "apr")):
        assert _ask(package, QueryRequest(query=query)).results[0].doc_id == expected
    alfa = _ask(package, QueryRequest(query="luvas isolantes inflagem", tenant=ALFA))
    assert alfa.results[0].doc_id == "epi.luvasIsolantes"
