"""The optional LLM answer: used when every citation is a retrieved chunk, else the
extractive answer; never asked for a fact or a decline, or without a generator."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from router.contract import AgentKnowledgeContext
from router.package.reader import KnowledgePackage
from router.pipeline import CascadeServices
from router.safety.injection import INJECTION_FLAG
from tests.cascade.common import (
    INJECTION_QUERY,
    OUT_OF_SCOPE,
    FakeGenerator,
    cascade,
    stage,
)


def test_generated_answer_citing_a_retrieved_chunk_is_used(package: KnowledgePackage) -> None:
    generator = FakeGenerator(cite=lambda context: [context.relevant_chunks[1].chunk_id])
    response = cascade(
        package, "O que é APR?", services=CascadeServices(generator=generator), generate=True
    )
    assert response.context is not None
    chunk = response.context.relevant_chunks[1]
    assert response.strategy_used == "enriched_rag"
    assert response.answer == f"Resposta gerada. [{chunk.chunk_id}]"
    assert [(c.doc_id, c.section_id) for c in response.citations] == [
        (chunk.doc_id, chunk.section_id)
    ]
    assert response.citations[0].passage in chunk.text
    generate = stage(response, "generate")
    assert generate["accepted"] is True and generate["model"] == "fake-llm-1"
    [(question, context)] = generator.calls
    assert question == "O que é APR?" and context == response.context


@pytest.mark.parametrize(
    "cite",
    [
        lambda context: ["naoExiste#secao"],
        lambda context: [context.relevant_chunks[0].chunk_id, "naoExiste#secao"],
        lambda context: [],
    ],
    ids=["unknown-id", "valid-and-unknown", "no-citation"],
)
def test_generated_answer_with_bad_citations_falls_back_to_extractive(
    package: KnowledgePackage, cite: Callable[[AgentKnowledgeContext], list[str]]
) -> None:
    extractive = cascade(package, "O que é APR?")
    generator = FakeGenerator(cite=cite)
    response = cascade(
        package, "O que é APR?", services=CascadeServices(generator=generator), generate=True
    )
    assert len(generator.calls) == 1
    assert response.strategy_used == extractive.strategy_used != "enriched_rag"
    assert response.answer == extractive.answer
    assert response.citations == extractive.citations
    assert stage(response, "generate")["accepted"] is False


def test_a_withheld_injection_chunk_cannot_be_cited(package: KnowledgePackage) -> None:
    def cite_injection(context: AgentKnowledgeContext) -> list[str]:
        return [c.chunk_id for c in context.relevant_chunks if INJECTION_FLAG in c.flags]

    generator = FakeGenerator(cite=cite_injection)
    response = cascade(
        package, INJECTION_QUERY, services=CascadeServices(generator=generator), generate=True
    )
    assert generator.calls and cite_injection(generator.calls[0][1])
    assert response.strategy_used != "enriched_rag"
    assert stage(response, "generate")["accepted"] is False


def test_generator_is_not_called_unless_asked_or_for_direct_facts(
    package: KnowledgePackage,
) -> None:
    generator = FakeGenerator(cite=lambda context: [context.relevant_chunks[0].chunk_id])
    services = CascadeServices(generator=generator)
    plain = cascade(package, "O que é APR?", services=services)
    fact = cascade(package, "Qual a validade padrão da APR?", services=services, generate=True)
    declined = cascade(package, OUT_OF_SCOPE, services=services, generate=True)
    assert generator.calls == []
    assert "generate" not in plain.trace["stages"]
    assert fact.strategy_used == "direct_answer" and "30" in fact.answer
    assert declined.abstained and declined.strategy_used == "safe_decline"


def test_generate_without_a_generator_is_extractive(package: KnowledgePackage) -> None:
    response = cascade(package, "O que é APR?", generate=True)
    assert stage(response, "generate")["skipped"]
    assert response.strategy_used != "enriched_rag" and response.citations
