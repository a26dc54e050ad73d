"""Direct answers come only from the right document: facts that compete across documents (the
same number, the same unit, similar names) never answer for another document, and a weak
result never answers directly."""

from __future__ import annotations

import pytest

from router.config import RouterConfig
from router.contract import QueryRequest, QueryResponse
from router.package.reader import KnowledgePackage
from router.pipeline import run_query
from tests.common import TODAY, package_of

DOCS = {
    "icamento.md": """---
semanticId: liftingPlan
title: Plano de içamento
facts:
  maxValidityHours: 8
  approver: Engenheiro de içamento
---
# Plano de içamento

O plano de içamento descreve a carga, o guindaste, o raio de operação e o isolamento da área.
O plano vale por no máximo 8 horas e é aprovado pelo engenheiro de içamento.
""",
    "quente.md": """---
semanticId: hotWork
title: Trabalho a quente
facts:
  maxValidityHours: 8
  approver: Supervisor de área
---
# Trabalho a quente

Solda, corte e esmerilhamento exigem permissão de trabalho a quente, extintor no local e
vigia de fogo. A permissão vale por no máximo 8 horas e é aprovada pelo supervisor de área.
""",
    "confinado.md": """---
semanticId: confinedSpace
title: Espaço confinado
facts:
  maxValidHours: 12
  gasTestIntervalMinutes: 30
---
# Espaço confinado

A entrada em espaço confinado exige medição de gases antes e durante o trabalho, vigia na
entrada e plano de resgate. A permissão de entrada vale por até 12 horas.
""",
    "andaime.md": """---
semanticId: scaffold
title: Andaimes
---
# Andaimes

A inspeção do andaime é feita antes de cada turno pelo montador qualificado, que registra
a validade da inspeção no cartão verde do andaime.
""",
}


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> KnowledgePackage:
    return package_of(tmp_path_factory.mktemp("competing-facts"), DOCS)


def ask(package: KnowledgePackage, query: str, config: RouterConfig | None = None) -> QueryResponse:
    return run_query(package, QueryRequest(query=query), config, today=TODAY)


@pytest.mark.parametrize(
    ("query", "doc_id", "value"),
    [
        ("Qual a validade máxima do plano de içamento em horas?", "liftingPlan", "8"),
        ("Quem aprova o trabalho a quente?", "hotWork", "Supervisor de área"),
        ("Quem aprova o plano de içamento?", "liftingPlan", "Engenheiro de içamento"),
        ("Por quantas horas vale a permissão de espaço confinado?", "confinedSpace", "12"),
    ],
)
def test_a_fact_answers_only_for_its_own_document(
    package: KnowledgePackage, query: str, doc_id: str, value: str
) -> None:
    response = ask(package, query)
    assert response.results[0].doc_id == doc_id
    assert response.strategy_used == "direct_answer", response.answer
    assert value.casefold() in response.answer.casefold()
    assert [c.doc_id for c in response.citations] == [doc_id]


def test_a_number_in_the_question_does_not_pull_another_documents_fact(
    package: KnowledgePackage,
) -> None:
    """The question names the confined space and "8 horas": two other documents hold
    ``maxValidityHours: 8``; the answer is still the confined space's own."""
    response = ask(package, "A permissão de espaço confinado vale para 8 horas?")
    assert response.results[0].doc_id == "confinedSpace"
    assert {c.doc_id for c in response.citations} == {"confinedSpace"}
    assert "8 horas" not in response.answer or "12" in response.answer


def test_a_top_document_without_the_fact_answers_extractively(package: KnowledgePackage) -> None:
    """The scaffold page has no fact; the validity facts of the other pages never stand in."""
    response = ask(package, "Qual a validade da inspeção do andaime?")
    assert response.results[0].doc_id == "scaffold"
    assert response.strategy_used != "direct_answer"
    assert [c.doc_id for c in response.citations][:1] == ["scaffold"]
    assert "cartão verde" in response.answer


def test_low_confidence_never_answers_directly(package: KnowledgePackage) -> None:
    query = "Quem aprova a solda e o corte?"  # no exact key: ranked by BM25
    assert ask(package, query).strategy_used == "direct_answer"
    everything_low = RouterConfig(high_confidence=1.0, medium_confidence=1.0)
    response = ask(package, query, everything_low)
    assert response.confidence_level == "LOW"
    assert response.strategy_used != "direct_answer"
    assert response.results[0].doc_id == "hotWork"


def test_an_exact_fact_id_answers_whatever_the_ranking(package: KnowledgePackage) -> None:
    response = ask(package, "hotWork.approver")
    assert response.strategy_used == "direct_answer"
    assert "supervisor de área" in response.answer.casefold()
