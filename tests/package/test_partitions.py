"""Partitions (docs/adr/0010): a tenant's documents never influence another tenant's answers.

The promise tested end to end: adding a document to tenant B changes nothing in any response to
tenant A or to an anonymous caller except the version id — not the ranking, the scores, the
spelling repair, the keyword phrases, the trace. The document added is built to leak if it
could: it repeats A's and the shared documents' words (shifting their document frequencies), it
carries words one typo from A's queries (the typo repair would pick them), accented spellings
(the accent lexicon) and an id that looks like A's.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from kr.golden import load_golden
from router.compile.build import build_knowledge
from router.compile.corpus import load_knowledge
from router.compile.indexer import BuildConfig, compile_documents
from router.contract import QueryRequest
from router.package.format.fields import FIELD_NAMES
from router.package.reader import KnowledgePackage, load_package
from router.package.version.partitions import SHARED_PARTITION, partition_key
from router.pipeline import run_query
from router.ranking.bm25 import query_lists, weighted_scores
from tests.common import ALFA, BETA, GOLDEN, KNOWLEDGE, TODAY, load_all_postings, write_doc
from tests.comparison.test_bm25_equivalence import quantization_error

LEAKY_DOC = """---
semanticId: metalurgicaBeta.leak
title: Permissão de trabalho e APR da Beta
tenant: metalurgica-beta
keywords: [permissão de trabalho, apr, andaime, cinto, extintor, bloqueio]
aliases: [cartão verde alfa]
---
# Permissão de trabalho e APR da Beta

A permissão de trabalho, a APR, o andaime fachadeiro, o cinto paraquedista e o extintor
aparecem aqui muitas vezes: permissão permissão trabalho trabalho andaime andaime cinto cinto.
Palavras raras da Beta: permissãoo andaimme cintto extintorr bloqueioo calibração emergência.
Veja [[construtoraAlfa.greenCard]] e [[apr]].
"""

PROBES = [
    "permissao de trabalho",  # accent folded
    "permisão de trabalho vencida",  # typo: the repair must only see A's and shared words
    "andaimme fachadeiro",
    "cartão verde alfa",  # an alias the leaky document claims
    "metalurgicaBeta.leak",  # B's id: A and anonymous must not even know it
    "extintorr",
    "calibraçao do detector",
]


def _strip(value: Any) -> Any:
    """A response without the one thing two versions may differ in: the version id."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "knowledge_version"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _stopped() -> float:
    return 0.0


def _load(files: dict[str, bytes]) -> KnowledgePackage:
    return load_package(files["manifest.json"], files.__getitem__)


@pytest.fixture(scope="module")
def before_and_after(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:  # type: ignore[type-arg]
    import shutil

    before = build_knowledge(KNOWLEDGE).package.files()
    copy = tmp_path_factory.mktemp("kb") / "knowledge"
    shutil.copytree(KNOWLEDGE, copy)
    write_doc(copy, "tenants/metalurgica-beta/leak.md", LEAKY_DOC)
    after = build_knowledge(copy).package.files()
    return before, after


def test_adding_a_document_to_tenant_b_changes_nothing_for_a_or_anonymous(
    before_and_after: tuple[dict[str, bytes], dict[str, bytes]],
) -> None:
    before, after = (_load(files) for files in before_and_after)
    assert before.version != after.version
    queries = [g.query for g in load_golden(GOLDEN)] + PROBES
    for tenant in (ALFA, None):
        for query in queries:
            request = QueryRequest(query=query, tenant=tenant)
            # a stopped clock: timings (and latency-budget skips) cannot differ
            old = run_query(before, request, today=TODAY, clock=_stopped).model_dump(mode="json")
            new = run_query(after, request, today=TODAY, clock=_stopped).model_dump(mode="json")
            assert _strip(new) == _strip(old), (tenant, query)
    # and B itself does see its new document (the test would pass vacuously otherwise)
    request = QueryRequest(query="metalurgicaBeta.leak", tenant=BETA)
    assert run_query(after, request, today=TODAY).results[0].doc_id == "metalurgicaBeta.leak"


def test_only_the_changed_tenants_files_change(
    before_and_after: tuple[dict[str, bytes], dict[str, bytes]],
) -> None:
    before, after = before_and_after
    changed = {n for n in after if n != "manifest.json" and before.get(n) != after[n]}
    assert changed and all(name.startswith(partition_key(BETA) + ".") for name in changed)
    assert any(name.startswith(f"{SHARED_PARTITION}.") for name in after)


def test_each_query_reads_the_shared_partition_and_its_own_only(
    before_and_after: tuple[dict[str, bytes], dict[str, bytes]],
) -> None:
    package = _load(before_and_after[1])
    keys = {p.key: {part.partition.key for part in package.view(p.entry.tenant).parts}
            for p in package.partitions}  # fmt: skip
    assert keys[SHARED_PARTITION] == {SHARED_PARTITION}
    for key, seen in keys.items():
        assert seen == {SHARED_PARTITION, key}
    assert {p.partition.key for p in package.view("nobody").parts} == {SHARED_PARTITION}


# --- how the statistics of two partitions combine (the formula in docs/adr/0010) -----------------


TWO_PARTITIONS = {
    "shared/andaime.md": (
        "---\nsemanticId: andaime\ntitle: Andaime\n---\n"
        "O andaime é inspecionado antes do turno. O andaime tem travas.\n"
    ),
    "shared/cinto.md": (
        "---\nsemanticId: cinto\ntitle: Cinto\n---\nO cinto é obrigatório acima de dois metros.\n"
    ),
    "alfa/andaime.md": (
        "---\nsemanticId: alfa.andaime\ntitle: Andaime da Alfa\ntenant: construtora-alfa\n---\n"
        "Na Alfa o andaime fachadeiro usa cinto e trava-quedas em todo andaime, sempre, "
        "com inspeção diária do andaime e registro da inspeção no sistema da obra.\n"
    ),
}


def test_two_partitions_score_with_summed_statistics_and_their_own_lengths(tmp_path: Path) -> None:
    """BM25F over a view = Σ_t idf(N_s + N_t, df_s + df_t) · tfn, where each section's tfn uses
    the average field lengths of its own partition (docs/adr/0010, "BM25 across two partitions")."""
    for name, text in TWO_PARTITIONS.items():
        write_doc(tmp_path, name, text)
    documents = load_knowledge(tmp_path).documents
    weights = {name: 1.0 if name == "body" else 0.0 for name in FIELD_NAMES}
    files = compile_documents(documents, BuildConfig(field_weights=weights)).files()
    view = load_all_postings(_load(files).view(ALFA))
    terms = view.analyzer.terms("andaime cinto")
    ours = weighted_scores(query_lists(view, terms, {"bm25f": 1.0}, "lucene"))

    bodies = [view.analyzer.terms(s.text) for d in documents for s in d.sections]
    owners = [d.tenant for d in documents for _ in d.sections]  # shared first in view order
    order = sorted(range(len(bodies)), key=lambda i: owners[i] != "*")
    k1, b, n = 1.5, 0.75, len(bodies)
    expected: dict[int, float] = {}
    for view_index, i in enumerate(order):
        same = [len(bodies[j]) for j in range(n) if owners[j] == owners[i]]
        average = sum(same) / len(same)
        score = 0.0
        for term in terms:
            tf = bodies[i].count(term)
            if tf:
                df = sum(term in body for body in bodies)
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                score += idf * tf / (tf + k1 * (1 - b + b * len(bodies[i]) / average))
        if score:
            expected[view_index] = score
    assert set(ours) == set(expected)
    for section, score in expected.items():
        assert ours[section] == pytest.approx(score, abs=quantization_error(terms, n))
