"""bench/synthetic_corpus.py: the same arguments give the same bytes, the corpus builds with the
real compiler without a diagnostic (strict), and its by-construction queries get the answers they
were built for, tenant isolation included."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import Stemmer
from bench.synthetic_corpus import CorpusSpec, Vocabulary, generate, heaps_vocabulary

from kr.golden import load_golden
from kr.outcomes import query_outcome, ranked_keys
from router.analysis.analyzer import Analyzer
from router.analysis.text import has_diacritics
from router.compile.build import BuildResult, build_knowledge
from router.contract import QueryRequest
from router.package.reader import KnowledgePackage, load_package
from router.pipeline import run_query

SPEC = CorpusSpec(sections=300, seed=7, tenants=3)
QUERY_DAY = "2026-06-15"


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("synthetic") / "corpus"
    generate(SPEC, root)
    return root


@pytest.fixture(scope="module")
def built(corpus: Path) -> BuildResult:
    return build_knowledge(corpus, strict=True)


@pytest.fixture(scope="module")
def package(built: BuildResult) -> KnowledgePackage:
    files = built.package.files()
    return load_package(files["manifest.json"], files.__getitem__)


def test_the_same_arguments_give_byte_identical_files(corpus: Path, tmp_path: Path) -> None:
    generate(SPEC, tmp_path / "again")
    assert _files(tmp_path / "again") == _files(corpus)
    generate(CorpusSpec(sections=300, seed=8, tenants=3), tmp_path / "other")
    assert _files(tmp_path / "other") != _files(corpus)


def test_it_builds_strict_with_the_shapes_of_the_format(built: BuildResult) -> None:
    assert built.corpus.diagnostics == []
    assert built.package.manifest.counts["sections"] == SPEC.sections
    docs = built.corpus.documents
    assert {d.tenant for d in docs if d.tenant != "*"} and len({d.tenant for d in docs}) == 4
    assert {"official", "verified", "deprecated"} <= {d.trust for d in docs}
    assert any(d.valid_until for d in docs) and all(d.valid_from for d in docs[:5])
    assert Counter(d.semantic_id for d in docs).most_common(1)[0][1] == 2  # a versioned rule
    facts = [v for d in docs for v in d.facts.values()]
    assert any(isinstance(v, bool) for v in facts) and any(type(v) is int for v in facts)
    assert any(d.aliases for d in docs) and all(d.keywords for d in docs)
    assert any(d.scope.get("page") for d in docs)
    sections = [s for d in docs for s in d.sections]
    assert sum(len(s.links) for s in sections) > len(sections)  # ~1.25 wikilinks per section
    assert any(s.explicit_id for s in sections) and {1, 2} <= {s.level for s in sections}
    assert any("." in d.semantic_id and d.semantic_id.count(".") >= 2 for d in docs)


def test_words_are_portuguese_like_and_their_plurals_fold() -> None:
    vocabulary = Vocabulary("test", heaps_vocabulary(SPEC.sections), 10)
    analyzer = Analyzer(stem=Stemmer.Stemmer("portuguese").stemWord)
    words = vocabulary.pool
    assert len({analyzer.terms(w.singular)[0] for w in words}) == len(words)
    assert all(analyzer.terms(w.plural) == analyzer.terms(w.singular) for w in words)
    assert sum(w.plural != w.singular for w in words) > len(words) / 2
    assert sum(has_diacritics(w.singular) for w in words) > len(words) / 5
    assert any("ç" in w.singular for w in words) and any(w.plural.endswith("ões") for w in words)
    assert heaps_vocabulary(100_000) < 10 * heaps_vocabulary(10_000)  # sublinear (Heaps)


def test_by_construction_queries_get_their_answers(corpus: Path, package: KnowledgePackage) -> None:
    queries = load_golden(corpus / "_queries.jsonl")
    categories = {q.category for q in queries}
    assert {"exact_id", "keyword", "term", "tenant", "tenant_isolation", "temporal"} <= categories
    failed = []
    for golden in queries:
        response = run_query(package, golden.request)
        outcome = query_outcome(golden, response, ranked_keys(golden, response), {})
        if not outcome.passed:
            failed.append((golden.id, golden.category, golden.query, outcome.top))
    assert failed == []


def test_a_tenant_only_document_is_invisible_without_its_tenant(
    built: BuildResult, package: KnowledgePackage
) -> None:
    doc = next(d for d in built.corpus.documents if d.tenant != "*" and d.valid_on(QUERY_DAY))
    day = QUERY_DAY

    def found(tenant: str | None) -> list[str]:
        request = QueryRequest(query=doc.semantic_id, tenant=tenant, date=day)  # type: ignore[arg-type]
        return [r.doc_id for r in run_query(package, request).results]

    assert found(doc.tenant)[:1] == [doc.semantic_id]
    assert doc.semantic_id not in found(None)
    other = next(d.tenant for d in built.corpus.documents if d.tenant not in ("*", doc.tenant))
    assert doc.semantic_id not in found(other)
