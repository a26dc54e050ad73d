"""Abstention by concept, not by word count (issue 30): a question whose specific concept the
knowledge does not hold is declined even when its common words match, and one whose concept is
there is answered.

A small HR help center: "prazo" and "empresa" are in almost every document (common, so
they weigh little in the caller's view), "estagiário" in one (specific). "qual o prazo da
empresa para o aprendiz?" matches two of its three words in the internship document, enough
for the word count (coverage 0.67), but its concept, "aprendiz", is nowhere.
"""

from __future__ import annotations

import dataclasses

import pytest

from router.config import RouterConfig
from router.contract import QueryRequest, QueryResponse
from router.package.reader import KnowledgePackage
from router.pipeline import run_query
from router.stages.confidence import _unknown_concepts, assess
from router.support.question_frame import ClosedClasses, verb_stems
from tests.common import TODAY, package_of
from tests.stages.state import searched_state

DOCS = {
    "estagio.md": """---
semanticId: hr.internship
title: Estágio
---
# Estágio

O contrato do estagiário tem prazo máximo de dois anos na mesma empresa. O estagiário cumpre
jornada de até seis horas por dia e recebe bolsa mensal.
""",
    "ferias.md": """---
semanticId: hr.vacation
title: Férias
---
# Férias

O pedido de férias é feito no portal com trinta dias de antecedência. A empresa paga as férias
até dois dias antes do início, e o prazo para marcar as férias vence no fim do período.
""",
    "ponto.md": """---
semanticId: hr.timeClock
title: Registro de ponto
---
# Registro de ponto

O empregado registra o ponto na entrada e na saída. O prazo para corrigir uma marcação é de
cinco dias, e a empresa aprova a correção no portal.
""",
    "holerite.md": """---
semanticId: hr.payslip
title: Holerite
---
# Holerite

O holerite fica disponível no portal no quinto dia útil. A empresa paga o salário no prazo
da convenção, por depósito na conta do empregado.
""",
    "beneficios.md": """---
semanticId: hr.benefits
title: Benefícios
---
# Benefícios

Vale-transporte, vale-refeição e plano de saúde. A empresa desconta até seis por cento do
salário para o vale-transporte.
""",
}

PRESENT = "qual o prazo da empresa para o estagiário?"
ABSENT = "qual o prazo da empresa para o aprendiz?"  # same common words, an unknown concept


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> KnowledgePackage:
    return package_of(tmp_path_factory.mktemp("hr-help-center"), DOCS)


def ask(package: KnowledgePackage, query: str, config: RouterConfig | None = None) -> QueryResponse:
    return run_query(package, QueryRequest(query=query), config, today=TODAY)


def test_a_question_whose_concept_is_in_the_knowledge_is_answered(
    package: KnowledgePackage,
) -> None:
    response = ask(package, PRESENT)
    assert not response.abstained
    assert response.results[0].doc_id == "hr.internship"
    confidence = response.trace["stages"]["confidence"]
    assert confidence["coverage"] == confidence["specific_coverage"] == 1.0


def test_common_words_matched_do_not_answer_for_a_concept_the_knowledge_lacks(
    package: KnowledgePackage,
) -> None:
    response = ask(package, ABSENT)
    confidence = response.trace["stages"]["confidence"]
    # the word count would answer: two words of three, above min_coverage ...
    assert confidence["coverage"] >= RouterConfig().min_coverage
    assert confidence["unknown_terms"] == ["aprendiz"]
    # ... but the two common words hold little of the question's specificity
    assert confidence["specific_coverage"] < RouterConfig().min_specific_coverage
    assert confidence["missing"] == 1.0  # what it lacks is a term the view does not know
    assert response.abstained and confidence["lexical_abstain"] is True
    assert response.abstention_reason and '"aprendiz"' in response.abstention_reason
    assert response.results, "its candidates still come back, as evidence (ADR 0022)"
    assert all("low_evidence" in r.flags for r in response.results)


def test_the_concept_rule_is_what_declines_it(package: KnowledgePackage) -> None:
    """With the rule off (min_specific_coverage 0), the same question is answered from the
    nearest document: the failure of issue 30."""
    by_word_count = RouterConfig(min_specific_coverage=0.0)
    assert not ask(package, ABSENT, by_word_count).abstained


def test_a_typo_of_a_known_concept_is_repaired_not_declined(package: KnowledgePackage) -> None:
    response = ask(package, "qual o prazo da empresa para o estagiaro?")
    assert not response.abstained
    assert response.results[0].doc_id == "hr.internship"


def test_a_number_the_knowledge_does_not_hold_is_a_value_not_a_missing_concept(
    package: KnowledgePackage,
) -> None:
    """An order number, an amount, a date are the caller's values: they count neither for nor
    against the question's specificity."""
    state = searched_state(package, "prazo do contrato do estagiário 48213")
    confidence = state.lexical_result().confidence
    assert "48213" in confidence.unknown_terms
    assert confidence.coverage < 1.0
    assert (confidence.specific_coverage, confidence.missing) == (1.0, 0.0)
    assert not assess(state).abstain


def test_a_compound_spelling_is_judged_by_its_parts(package: KnowledgePackage) -> None:
    """The analyzer adds "registro-ponto" (and "registroponto") beside "registr" and "pont":
    the compound unknown is only a spelling the documents do not use, its parts name the
    concept; a part unknown ("seguro-desemprego": "desempreg") is a missing concept."""
    state = searched_state(package, "qual o prazo para corrigir o registro-ponto?")
    confidence = state.lexical_result().confidence
    assert "registro-ponto" in confidence.unknown_terms
    assert confidence.specific_coverage == 1.0 and not assess(state).abstain
    missing = searched_state(package, "qual o prazo da empresa para o seguro-desemprego?")
    assert "desempreg" in missing.lexical_result().confidence.unknown_terms
    assert assess(missing).abstain


def test_an_action_request_may_name_arguments_the_knowledge_does_not_hold(
    package: KnowledgePackage,
) -> None:
    """ "aprove a correção de ponto do Joaquim": the person is the action's argument, not a
    concept."""
    state = searched_state(package, "aprove a correção de ponto do Joaquim")
    assert state.features.potential_action
    confidence = state.lexical_result().confidence
    assert confidence.unknown_terms and confidence.specific_coverage < 1.0
    strict = dataclasses.replace(state, config=RouterConfig(min_specific_coverage=1.0))
    assert not assess(strict).abstain


def test_a_verb_or_modal_the_knowledge_never_writes_is_no_missing_concept(
    package: KnowledgePackage,
) -> None:
    """ "posso" and "colocar" appear in no document: they are the question's wording, not a
    concept the knowledge lacks ("quantas fotos posso colocar em um anúncio?" was declined
    on a help center that writes "adicionar"); "aprendiz", a noun, still is one."""
    state = searched_state(package, "posso colocar o aprendiz nas férias?")
    assert {"poss", "coloc", "aprendiz"} <= set(state.lexical_result().confidence.unknown_terms)
    assert _unknown_concepts(state) == ["aprendiz"]
    analyzer = package.view(None).analyzer
    assert verb_stems(analyzer, ["colocar", "enviando", "fotos", "aprendiz"]) == frozenset(
        analyzer.terms("colocar enviando")
    )
    assert set(analyzer.terms("posso quantas")) <= ClosedClasses.of(analyzer).modal


def test_a_name_the_knowledge_never_mentions_is_a_missing_concept(
    package: KnowledgePackage,
) -> None:
    """Everything but the name matches, specificity included ("jornada", "estagiário"): the
    question is about the Acme company's interns, which this knowledge does not hold. The same
    question without the name, or with a name it knows, is answered."""
    named = ask(package, "qual a jornada do estagiário na Construtora Acme?")
    assert named.trace["stages"]["confidence"]["specific_coverage"] >= (
        RouterConfig().min_specific_coverage
    )
    assert named.abstained and named.abstention_reason and "acme" in named.abstention_reason
    assert not ask(package, "qual a jornada do estagiário?").abstained
    assert not ask(package, "qual a jornada do Estagiário?").abstained  # a name it knows
