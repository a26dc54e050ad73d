"""Stage — vector search: tenant isolation and ranking over the in-process index."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

import pytest

from router.adapters.local.vector_index import LocalVectorIndex
from router.package.reader import KnowledgePackage
from router.package.view import PackageView
from router.stages.confidence import assess
from router.stages.vector import MAX_EMBED_CHARS, vector_search, vector_skip_reason
from router.vectors.hash_embedder import HashEmbedder
from tests.common import ALFA, BETA, with_all_records
from tests.stages.state import searched_state


def doc_tenant(package: PackageView, section: int) -> str:
    return with_all_records(package).documents[package.section_doc[section]].tenant


@pytest.mark.parametrize(
    ("tenant", "query"),
    [
        (ALFA, "procedimento OBF de bloqueio do forno de indução"),  # Beta's own procedure
        (BETA, "regra do Cartão Verde para andaime fachadeiro"),  # Alfa's own rule
        (None, "procedimento OBF de bloqueio do forno de indução"),
    ],
)
def test_vector_search_never_reaches_another_tenants_sections(
    vpackage: KnowledgePackage, vindex: LocalVectorIndex, tenant: str | None, query: str
) -> None:
    view = vpackage.view(tenant)
    found = asyncio.run(vector_search(view, HashEmbedder(), vindex, query, tenant, 50))
    assert len(found) == 50
    assert {doc_tenant(view, s) for s, _ in found} <= {"*", tenant}


@pytest.mark.parametrize(
    ("tenant", "query"),
    [
        (BETA, "procedimento OBF de bloqueio do forno de indução"),
        (ALFA, "regra do Cartão Verde para andaime fachadeiro"),
    ],
)
def test_vector_search_finds_the_asking_tenants_own_sections(
    vpackage: KnowledgePackage, vindex: LocalVectorIndex, tenant: str, query: str
) -> None:
    view = vpackage.view(tenant)
    found = asyncio.run(vector_search(view, HashEmbedder(), vindex, query, tenant, 10))
    assert doc_tenant(view, found[0][0]) == tenant
    assert [score for _, score in found] == sorted((score for _, score in found), reverse=True)


class _Recording(HashEmbedder):
    """The test embedder, remembering what it was asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    async def embed(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        self.asked += texts
        return await super().embed(texts, kind)


def test_the_embedder_reads_a_bounded_part_of_any_question(
    vpackage: KnowledgePackage, vindex: LocalVectorIndex
) -> None:
    """A 2,000-character question costs the embedder no more than a long real one: tokens no
    word is that long are dropped, the rest cut at a word under MAX_EMBED_CHARS; a question of
    such tokens alone is not embedded at all."""
    view, embedder = vpackage.view(None), _Recording()
    long_question = "validade da APR " * 200
    found = asyncio.run(vector_search(view, embedder, vindex, long_question, None, 5))
    assert found and len(embedder.asked[-1]) <= MAX_EMBED_CHARS
    words = " ".join(long_question.split())
    assert words.startswith(embedder.asked[-1] + " ")  # cut between two words
    noise = "x" * 2000
    assert asyncio.run(vector_search(view, embedder, vindex, noise, None, 5)) == []
    assert len(embedder.asked) == 1
    short = "Qual a validade da APR?"
    asyncio.run(vector_search(view, embedder, vindex, short, None, 5))
    assert embedder.asked[-1] == short  # a real question is embedded whole


# --- routing: a lexical abstention reaches the vector stage whatever its level -----------------


ROUTED = "onde vejo minhas tarefas em aberto logo que entro?"
"""A paraphrase whose lexical result is HIGH on too little of the question (coverage 0.25)."""


def test_a_lexical_abstention_at_high_reaches_the_vector_stage(
    vpackage: KnowledgePackage, vindex: LocalVectorIndex
) -> None:
    state = searched_state(vpackage, ROUTED)
    state.assessment = assess(state)
    assert (state.verdict().level, state.verdict().abstain) == ("HIGH", True)
    assert vector_skip_reason(state, HashEmbedder(), vindex) is None
    fast = dataclasses.replace(state, tier="fast")
    assert (
        vector_skip_reason(fast, HashEmbedder(), vindex) == "latency tier fast: lexical stages only"
    )
