"""Facts grounded in the passage (issue 30): of a document's several facts of one kind, the
sentence that best matches the question decides which one answers, never the key's name; an
answer is that sentence as a reader reads it, the fact goes in the structured ``fact`` field;
without a fact in that sentence the answer quotes the best sentence, not the section's lead.

The knowledge is a small HR help center written for this test, in a domain the router was not
tuned on, with English camelCase keys and Portuguese text, as a customer's would be."""

from __future__ import annotations

import pytest

from router.contract import QueryRequest, QueryResponse
from router.package.reader import KnowledgePackage
from router.pipeline import run_query
from router.support.grounding import numbers_in, rank_sentences, states_value
from router.support.plain_text import plain_sentence
from tests.common import TODAY, package_of

DOCS = {
    "ferias.md": """---
semanticId: ferias
title: Férias
facts:
  noticeDaysBefore: 30
  paymentDaysBefore: 2
  expiryAlertDays: 60
  maxSplits: 3
---
# Férias

As férias podem ser divididas em até **3 períodos**, e um deles deve ter pelo menos 14 dias.

## Aviso e pagamento {#ferias.aviso}

A empresa precisa avisar o colaborador com **30 dias** de antecedência do início das férias.
O pagamento das férias é feito até **2 dias** antes do primeiro dia de descanso.

## Vencimento {#ferias.vencimento}

O sistema envia um alerta ao gestor **60 dias** antes de as férias vencerem.
""",
    "beneficios.md": """---
semanticId: beneficios
title: Benefícios
facts:
  mealVoucherBRL: 35.5
  responsibleTeam: "Time de Benefícios"
  gymSubsidyPercent: 50
---
# Benefícios

Os benefícios são geridos pelo Time de Benefícios, que responde às dúvidas pelo portal.

## Valores {#beneficios.valores}

| Benefício | Valor |
|---|---|
| Vale-refeição por dia útil | R$ 35,50 |
| Academia | 50% da mensalidade |

## Adesão

A adesão ao plano odontológico é opcional e pode ser feita a qualquer momento pelo portal.
""",
    "ponto.md": """---
semanticId: ponto
title: Registro de ponto
facts:
  toleranceMinutes: 10
  minEmployeesForElectronicClock: 20
---
# Registro de ponto

O registro de ponto vale para todos os colaboradores contratados pela CLT.

## Tolerância

Atrasos de até **10 minutos** por dia não são descontados do salário.

## Ponto eletrônico

O ponto eletrônico é obrigatório em empresas com mais de **20 empregados**; abaixo disso, a
folha manual é aceita. O ponto por aplicativo exige a geolocalização ativada.
""",
}


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> KnowledgePackage:
    return package_of(tmp_path_factory.mktemp("hr-help-center"), DOCS)


def ask(package: KnowledgePackage, query: str) -> QueryResponse:
    return run_query(package, QueryRequest(query=query), today=TODAY)


@pytest.mark.parametrize(
    ("query", "key", "said"),
    [
        # three numeric facts in days: the sentence says which is the notice period
        (
            "com quantos dias de antecedência a empresa precisa avisar as férias?",
            "noticeDaysBefore",
            "30 dias",
        ),
        (
            "quantos dias antes do descanso é feito o pagamento das férias?",
            "paymentDaysBefore",
            "2 dias",
        ),
        (
            "quantos dias antes do vencimento das férias o gestor recebe o alerta?",
            "expiryAlertDays",
            "60 dias",
        ),
        # a value in Portuguese notation, in a table row that names its columns
        ("qual o valor do vale-refeição por dia?", "mealVoucherBRL", "35,50"),
        # a team asked with "qual equipe": the text value, not a number of the same document
        ("qual time gere os benefícios?", "responsibleTeam", "Time de Benefícios"),
    ],
)
def test_the_passage_decides_which_fact_answers(
    package: KnowledgePackage, query: str, key: str, said: str
) -> None:
    response = ask(package, query)
    assert response.strategy_used == "direct_answer", response.answer
    assert response.fact is not None and response.fact.key == key
    assert said in response.answer
    # a reader's sentence: no key name, no Markdown; the cited sentence is the answer
    assert key not in response.answer and "**" not in response.answer and "|" not in response.answer
    [citation] = response.citations
    assert citation.passage in response.answer
    assert citation.section_id == response.fact.section_id
    assert response.fact.address == f"{response.fact.doc_id}.{key}"


def test_the_extractive_answer_quotes_the_sentence_with_the_asked_threshold(
    package: KnowledgePackage,
) -> None:
    """The right document's lead and its other sentences are not the answer; the one that holds
    the question's specific terms ("eletrônico", "obrigatório", "empregados") is."""
    response = ask(package, "a partir de quantos empregados o ponto eletrônico é obrigatório?")
    assert response.results[0].doc_id == "ponto"
    assert "20 empregados" in response.answer
    assert "CLT" not in response.answer and "geolocalização" not in response.answer


def test_a_value_the_question_states_is_not_the_answer(package: KnowledgePackage) -> None:
    """ "com mais de 20 empregados" names the threshold: the question asks for something else,
    and 20 is never the fact that answers it."""
    response = ask(package, "qual a tolerância de atraso em empresas com mais de 20 empregados?")
    assert response.fact is None or response.fact.key != "minEmployeesForElectronicClock"


def test_no_fact_when_the_best_sentence_states_none(package: KnowledgePackage) -> None:
    response = ask(package, "qual o prazo para aderir ao plano odontológico?")
    assert response.results[0].doc_id == "beneficios"
    assert response.strategy_used != "direct_answer" and response.fact is None
    assert "odontológico" in response.answer


def test_numbers_are_read_in_either_notation() -> None:
    assert numbers_in("Taxa de **2,99%**, mínimo R$ 1.000,00 e 81.000 no ano") == [
        2.99,
        1000.0,
        81000.0,
    ]
    assert states_value("R$ 6,50 por unidade", 6.5) and states_value("até 30 dias", 30)
    assert not states_value("até 300 dias", 30) and not states_value("NR-3", 30)
    assert states_value("pelo **Time de Cadastro e Risco**", "time de cadastro e risco")
    assert not states_value("o prazo é curto", True)  # yes/no facts are never grounded by value


def test_a_label_is_one_sentence_with_its_value(package: KnowledgePackage) -> None:
    analyzer = package.view(None).analyzer
    ranked = rank_sentences(
        analyzer,
        {t: 1.0 for t in analyzer.terms("peso máximo")},
        [(0, "", "Peso máximo: **30 kg**. Medidas: até 100 cm.")],
    )
    assert ranked[0].text == "Peso máximo: **30 kg**."


@pytest.mark.parametrize(
    ("markdown", "plain"),
    [
        ("O prazo é de **30 dias** (ver [[apr|APR]]).", "O prazo é de 30 dias (ver APR)."),
        ("- Taxa de *2,99%* [tabela](https://x.y/t).", "Taxa de 2,99% tabela."),
        ("| Reclamações | até **3%** |", "Reclamações: até 3%"),
        ("|---|---|", ""),
    ],
)
def test_markdown_is_stripped_for_the_reader(markdown: str, plain: str) -> None:
    assert plain_sentence(markdown) == plain
