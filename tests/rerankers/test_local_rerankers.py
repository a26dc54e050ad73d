"""The offline rerankers: the lexical one (phrases, title and heading, rarity among the
candidates, the fused order as a prior) and cosine over the embedder port — which reads the
same passage text a section's vector was built from, so the vector cache serves it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from router.compile.corpus import load_knowledge
from router.contract import QueryRequest
from router.errors import BindingError, RerankError
from router.package.reader import KnowledgePackage
from router.pipeline import CascadeServices, run_cascade
from router.ports import Reranker
from router.rerankers.embedding import EmbeddingReranker, cosine
from router.rerankers.lexical import LexicalReranker, LexicalWeights, terms
from router.sync import run_sync
from router.vectors.hash_embedder import HashEmbedder
from router.vectors.passages import passage_text
from tests.common import KNOWLEDGE, TODAY


def rank(
    question: str, passages: Sequence[str], weights: LexicalWeights | None = None
) -> list[int]:
    scores = LexicalReranker(weights).scores(question, passages)
    return sorted(range(len(passages)), key=lambda i: (-scores[i], i))


def test_terms_fold_case_and_accents_drop_stopwords_and_cut_words() -> None:
    assert terms("A Permissão de Trabalho") == ["permis", "trabal"]
    assert terms("the validity of permits") == ["validi", "permit"]


def test_the_question_in_order_lifts_a_later_passage() -> None:
    scattered = "Geral\nO trabalho exige permissão; a validade depende do tipo de tarefa."
    phrase = "Prazos\nA validade da permissão de trabalho é de oito horas."
    assert rank("validade da permissão de trabalho", [scattered, phrase]) == [1, 0]


def test_the_title_and_heading_line_counts() -> None:
    body_only = "Regras gerais\nO extintor deve ser inspecionado todo mês por um responsável."
    titled = "Extintores › Inspeção\nDeve ser feita todo mês por um responsável."
    assert rank("inspeção de extintores", [body_only, titled]) == [1, 0]


def test_a_word_every_candidate_holds_decides_nothing() -> None:
    passages = ["Norma\nA norma trata de altura.", "Norma\nA norma trata de andaimes."]
    scores = LexicalReranker(LexicalWeights(prior=0.0)).scores("norma andaimes", passages)
    assert scores[1] > scores[0]  # "norma" is in both; only "andaimes" tells them apart


def test_without_evidence_the_fused_order_stays() -> None:
    same = ["Texto\nnada em comum"] * 4
    scores = LexicalReranker().scores("pergunta sem relação", same)
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == 4
    assert rank("", ["a", "b", "c"]) == [0, 1, 2]


def test_it_is_a_reranker() -> None:
    reranker = LexicalReranker()
    assert isinstance(reranker, Reranker) and reranker.model == "local-lexical"
    assert asyncio.run(reranker.rerank("q", [])) == []


class Recording:
    """The hash embedder, remembering what it was asked to embed."""

    def __init__(self, fail: bool = False) -> None:
        self.inner = HashEmbedder()
        self.model_id = self.inner.model_id
        self.dimensions = self.inner.dimensions
        self.fail = fail
        self.texts: list[tuple[str, str]] = []

    async def embed(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        if self.fail:
            raise BindingError("Workers AI @cf/baai/bge-m3 failed: 3040")
        self.texts += [(kind, t) for t in texts]
        return await self.inner.embed(texts, kind)  # type: ignore[arg-type]


def test_cosine_reranker_scores_by_similarity() -> None:
    embedder = Recording()
    reranker = EmbeddingReranker(embedder)
    assert reranker.model == f"cosine:{embedder.model_id}"
    passages = ["capacete de segurança", "extintor de incêndio", "capacete"]
    scores = asyncio.run(reranker.rerank("capacete", passages))
    assert scores[2] > scores[0] > scores[1]
    assert cosine([1.0, 0.0], [0.0, 1.0]) == 0.0 and cosine([0.0], [0.0]) == 0.0
    with pytest.raises(RerankError, match="3040"):
        asyncio.run(EmbeddingReranker(Recording(fail=True)).rerank("q", passages))


def test_the_reranker_reads_the_passages_the_vectors_were_built_from(
    package: KnowledgePackage,
) -> None:
    built = {passage_text(d, s) for d in load_knowledge(KNOWLEDGE).documents for s in d.sections}
    embedder = Recording()
    services = CascadeServices(reranker=EmbeddingReranker(embedder))
    request = QueryRequest(query="treinamento de emergência")
    response = run_sync(run_cascade(package, request, None, services, today=TODAY))
    assert response.trace["stages"]["rerank"]["candidates"] > 1
    passages = [t for kind, t in embedder.texts if kind == "passage"]
    assert passages and set(passages) <= built  # each one a cache hit after `kr build`
