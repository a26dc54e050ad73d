"""The pure-Python scorer over the compiled package against bm25s and against the BM25F formula.

Three references, one per way a score can go wrong:

* per-field layout (``scoring="fields"``): bm25s computes the body block's impacts, so its top-10
  must be bm25s's own on SciFact;
* BM25F layout (the default, ``router/compile/fields.py`` computes the impacts): with body weight 1
  and every other field 0, BM25F *is* BM25 over the bodies, so it must equal bm25s too (on SciFact
  and on the sample knowledge, which is always present);
* BM25F with real weights has no library to compare with: a brute-force BM25F written here from
  the formula (Robertson, Zaragoza & Taylor 2004, with Lucene's IDF) scores a small corpus, and the
  compiled scorer must give every section the same score.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from kr.golden import load_golden
from router.analysis.analyzer import AnalyzerConfig
from router.compile.beir import load_beir
from router.compile.corpus import load_knowledge
from router.compile.fields import section_fields
from router.compile.indexer import BuildConfig, compile_documents
from router.knowledge.model import Document
from router.package.format.fields import BM25F_BLOCK, DEFAULT_FIELD_WEIGHTS, FIELD_NAMES
from router.package.reader import load_package
from router.package.view import PackageView
from router.ranking.bm25 import block_weights, query_lists, weighted_scores
from router.ranking.pruning import weighted_top_k
from tests.common import GOLDEN, KNOWLEDGE, SHARED_DATA, load_all_postings, with_terms, write_doc

SCIFACT = SHARED_DATA / "scifact"
TOLERANCE = 1e-4  # bm25s sums float32 impacts; the Worker sums them as float64
BODY_ONLY = {name: 1.0 if name == "body" else 0.0 for name in FIELD_NAMES}
K1, B = 1.5, 0.75  # BuildConfig's defaults (the manifest test pins them)


def _load(documents: Sequence[Document], config: BuildConfig) -> PackageView:
    """The anonymous caller's view of the compiled documents (all shared here)."""
    files = compile_documents(documents, config).files()
    return load_all_postings(load_package(files["manifest.json"], files.__getitem__).view(None))


def _body_tokens(package: PackageView, documents: Sequence[Document]) -> list[list[str]]:
    """The body field of every section, in section order, as the package's analyzer sees it."""
    return [
        package.analyzer.terms(section_fields(doc, section, index == 0)["body"])
        for doc in documents
        for index, section in enumerate(doc.sections)
    ]


def _assert_top10_equals_bm25s(
    package: PackageView, block: str, bodies: list[list[str]], queries: list[str]
) -> int:
    """Our top-10 over ``block`` (IDF applied at query time) against bm25s (lucene) over
    ``bodies``; how many queries were compared."""
    import bm25s
    import numpy as np

    reference = bm25s.BM25(method="lucene", k1=K1, b=B)
    reference.index(bodies, show_progress=False)
    compared = 0
    for text in queries:
        tokens = package.analyzer.terms(text)
        lists = query_lists(with_terms(package, tokens), tokens, {block: 1.0}, "lucene")
        ours = weighted_top_k(lists, 10).ranked
        known = [t for t in tokens if t in reference.vocab_dict]
        if not known:
            assert ours == [], text
            continue
        scores = reference.get_scores(known)
        order = np.argsort(-scores, kind="stable")[:10]
        ref = [(int(i), float(scores[i])) for i in order if scores[i] > 0]
        assert len(ours) == len(ref), text
        for (_, our_score), (_, ref_score) in zip(ours, ref, strict=True):
            assert abs(our_score - ref_score) <= TOLERANCE * max(1.0, ref_score), text
        boundary = ref[-1][1]
        must_have = {i for i, s in ref if s > boundary + TOLERANCE}
        assert must_have <= {i for i, _ in ours}, text
        # same ranking wherever bm25s's scores are not tied
        for rank, (ref_id, ref_score) in enumerate(ref):
            neighbours = [s for _, s in ref if abs(s - ref_score) <= TOLERANCE]
            if len(neighbours) == 1:
                assert ours[rank][0] == ref_id, text
        compared += 1
    return compared


# --- against bm25s ------------------------------------------------------------------------------


@pytest.mark.skipif(not SCIFACT.is_dir(), reason=f"SciFact not found at {SCIFACT}")
@pytest.mark.parametrize(
    ("scoring", "weights", "block"),
    [("fields", DEFAULT_FIELD_WEIGHTS, "body"), ("bm25f", BODY_ONLY, BM25F_BLOCK)],
    ids=["fields-body-block", "bm25f-body-weight-only"],
)
def test_top10_ids_and_scores_equal_bm25s_on_scifact(
    scoring: str, weights: Mapping[str, float], block: str
) -> None:
    collection = load_beir(SCIFACT)
    config = BuildConfig(
        analyzer=AnalyzerConfig(language="english"), scoring=scoring, field_weights=weights
    )
    package = _load(collection.documents, config)
    assert set(package.block_names) >= {block}
    bodies = _body_tokens(package, collection.documents)
    compared = _assert_top10_equals_bm25s(package, block, bodies, list(collection.queries.values()))
    assert compared >= 290


def test_bm25f_with_body_weight_only_equals_bm25s_on_the_sample_knowledge() -> None:
    documents = load_knowledge(KNOWLEDGE).documents
    package = _load(documents, BuildConfig(field_weights=BODY_ONLY))
    assert package.block_names == [BM25F_BLOCK]
    queries = [g.query for g in load_golden(GOLDEN)]
    shared = [doc for doc in documents if doc.tenant == "*"]  # the anonymous view's documents
    compared = _assert_top10_equals_bm25s(
        package, BM25F_BLOCK, _body_tokens(package, shared), queries
    )
    assert compared >= 60


# --- against the BM25F formula ------------------------------------------------------------------


def brute_force_bm25f(
    sections: Sequence[Mapping[str, list[str]]],
    weights: Mapping[str, float],
    query: Sequence[str],
    k1: float = K1,
    b: float = B,
) -> dict[int, float]:
    """BM25F from its definition, one section at a time, nothing precomputed or shared.

    tf~(t, d) = sum over fields f of w_f * tf_f(t, d);  dl~(d) = sum over f of w_f * |d_f|;
    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5)), df(t) = #{d : tf~(t, d) > 0};
    score(q, d) = sum over query tokens t (repeats count) of
                  idf(t) * tf~(t, d) / (tf~(t, d) + k1 * (1 - b + b * dl~(d) / avgdl~)).
    """
    n = len(sections)

    def tf(term: str, fields: Mapping[str, list[str]]) -> float:
        return sum(weights.get(f, 0.0) * tokens.count(term) for f, tokens in fields.items())

    def length(fields: Mapping[str, list[str]]) -> float:
        return sum(weights.get(f, 0.0) * len(tokens) for f, tokens in fields.items())

    average = sum(length(fields) for fields in sections) / n
    scores: dict[int, float] = {}
    for number, fields in enumerate(sections):
        total, matched = 0.0, False
        for term in query:
            frequency = tf(term, fields)
            if frequency <= 0:
                continue
            df = sum(1 for other in sections if tf(term, other) > 0)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            norm = k1 * (1 - b + b * length(fields) / average)
            total += idf * frequency / (frequency + norm)
            matched = True
        if matched:
            scores[number] = total
    return scores


def quantization_error(tokens: Sequence[str], sections: int) -> float:
    """The most a compiled score can differ from the exact one: each stored impact is within
    half a quantization step (largest impact / 65,535 ≤ 1 / 65,535 for Lucene's tfc) of its
    value, times the term's IDF (≤ ln(1 + 2N)), per query token; plus float32 rounding."""
    return len(tokens) * math.log(1 + 2 * sections) / (2 * 65535) + 1e-6


SMALL_CORPUS = {
    "andaime.md": (
        "---\nsemanticId: andaime.montagem\ntitle: Montagem de andaime\n"
        "description: Como montar um andaime fachadeiro com segurança.\n"
        "keywords: [andaime, fachadeiro, montagem]\naliases: [andaime tubular]\n---\n"
        "# Montagem de andaime\n\nO andaime é montado por equipe treinada. Veja [[cinto.uso]].\n\n"
        "## Inspeção do andaime {#andaime.inspecao}\n\n"
        "Inspecione o andaime, as travas e o piso do andaime antes de cada turno.\n"
    ),
    "cinto.md": (
        "---\nsemanticId: cinto.uso\ntitle: Uso do cinto de segurança\n"
        "keywords: [cinto, trava-quedas]\n---\n"
        "O cinto de segurança tipo paraquedista é obrigatório acima de dois metros, "
        "inclusive em andaime. O trava-quedas é preso à linha de vida.\n"
    ),
    "extintor.md": (
        "---\nsemanticId: extintor.inspecao\ntitle: Inspeção de extintores\n"
        "description: Inspeção mensal dos extintores de incêndio.\n---\n"
        "Cada extintor é inspecionado todo mês; o extintor vencido é recolhido.\n\n"
        "## Recarga {#extintor.recarga}\n\nA recarga do extintor é anual.\n"
    ),
    "ruido.md": (
        "---\nsemanticId: ruido.protetor\ntitle: Protetor auricular\n"
        "keywords: [ruído, protetor auricular]\n---\n"
        "Use protetor auricular em áreas de ruído acima de 85 dB. Veja [[extintor.inspecao]].\n"
    ),
}
SMALL_QUERIES = [
    "andaime",
    "inspeção do andaime",
    "andaime andaime cinto",  # a repeated token counts twice, as in bm25s
    "trava-quedas linha de vida",
    "extintor recarga anual",
    "andaime.inspecao",  # a section id: semantic_id field
    "protetor auricular ruído extintor",
    "fachadeiro tubular",  # keywords/aliases/description only (first section)
    "palavra ausente",
]
WEIGHTS = {
    "default": dict(DEFAULT_FIELD_WEIGHTS),
    "uneven": {**DEFAULT_FIELD_WEIGHTS, "title": 7.0, "body": 0.5, "wikilinks": 0.0},
}


@pytest.mark.parametrize("weights", WEIGHTS.values(), ids=WEIGHTS.keys())
def test_compiled_bm25f_equals_a_brute_force_bm25f(
    tmp_path: Path, weights: Mapping[str, float]
) -> None:
    for name, text in SMALL_CORPUS.items():
        write_doc(tmp_path, name, text)
    corpus = load_knowledge(tmp_path)
    assert not corpus.errors
    package = _load(corpus.documents, BuildConfig(field_weights=weights))
    assert package.block_names == [BM25F_BLOCK]

    sections: list[dict[str, list[str]]] = []
    for doc in corpus.documents:
        for index, section in enumerate(doc.sections):
            texts = section_fields(doc, section, index == 0)
            sections.append({name: package.analyzer.terms(texts[name]) for name in FIELD_NAMES})
    assert len(sections) == package.num_sections == 6

    scored_somewhere = 0
    for query in SMALL_QUERIES:
        tokens = package.analyzer.terms(query)
        expected = brute_force_bm25f(sections, weights, tokens)
        weighted = block_weights(package.block_names, weights)
        lists = query_lists(with_terms(package, tokens), tokens, weighted, "lucene")
        ours = weighted_scores(lists)
        assert set(ours) == set(expected), query
        for section, score in expected.items():
            bound = quantization_error(tokens, len(sections))
            assert ours[section] == pytest.approx(score, abs=bound), (query, section)
        scored_somewhere += bool(expected)
    assert scored_somewhere == len(SMALL_QUERIES) - 1  # only "palavra ausente" matches nothing
