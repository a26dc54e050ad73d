"""Stage — query analyzer: whether a question asks to act (agentic) or to know, what kind of
answer it wants, whether it points at the screen, and which of its words are searched."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from router.analysis.analyzer import Analyzer
from router.config import DEFAULT_MAX_QUERY_WORDS, RetrievalBudget, RouterConfig
from router.package.reader import KnowledgePackage
from router.results import QueryFeatures
from router.stages.normalizer import normalize_query
from router.stages.query_analyzer import analyze_query
from router.support.question_frame import ClosedClasses
from tests.stages.state import query_state

Analyze = Callable[..., QueryFeatures]


@pytest.fixture(scope="module")
def analyze(package: KnowledgePackage) -> Analyze:
    """``analyze_query`` with the sample's analyzer and frame words, as the pipeline calls it."""
    analyzer: Analyzer = package.view(None).analyzer
    classes = ClosedClasses.of(analyzer)

    def _analyze(query: str, max_words: int = DEFAULT_MAX_QUERY_WORDS) -> QueryFeatures:
        return analyze_query(normalize_query(query), analyzer, classes, max_words)

    return _analyze


@pytest.mark.parametrize(
    "query",
    [
        "crie uma nova permissão de trabalho para o João",  # an imperative
        "Quero cancelar a PT 123",  # a request lead, then an infinitive
        "me ajude a criar uma APR",
        "você pode aprovar a APR?",
        "quero que você aprove a APR",
        "cancelar a permissão de trabalho",  # a bare infinitive with its object
    ],
)
def test_a_request_to_act_is_agentic(analyze: Analyze, query: str) -> None:
    features = analyze(query)
    assert features.intent == "agentic" and features.potential_action


@pytest.mark.parametrize(
    "query",
    [
        "Como criar uma permissão de trabalho?",  # asks how, names the same action
        "O que é APR?",
        "cancelar permissão",  # two words: a topic, not an order
        "o técnico aprova a APR",
    ],
)
def test_a_question_is_a_knowledge_need(analyze: Analyze, query: str) -> None:
    features = analyze(query)
    assert features.intent == "knowledge" and not features.potential_action


@pytest.mark.xfail(
    strict=True,
    reason="a comma after a polite lead ('por favor,') hides the imperative after it: the leads "
    "are matched only when a space follows them",
)
def test_a_polite_request_with_a_comma_is_agentic(analyze: Analyze) -> None:
    assert analyze("por favor, renove a PT").intent == "agentic"


@pytest.mark.parametrize(
    ("query", "task_type"),
    [
        ("diferença entre APR e PT", "comparative"),
        ("Quantos dias vale a APR?", "structured_numeric"),
        ("Qual a validade da APR?", "structured_numeric"),
        ("Como preencher a APR?", "procedural"),
        ("Por que a APR venceu?", "analytical"),
        ("APR", "exploratory"),
        ("o técnico aprova a APR", "factual"),
    ],
)
def test_the_task_type(analyze: Analyze, query: str, task_type: str) -> None:
    assert analyze(query).task_type == task_type


@pytest.mark.parametrize(
    ("query", "value_question", "answer_type"),
    [
        ("Qual a validade da APR?", True, "any"),
        ("Quem aprova a APR?", True, "person"),
        ("Quantos dias vale a APR?", True, "number"),
        ("Como preencher a APR?", False, "any"),
        ("O que é APR?", False, "any"),
    ],
)
def test_a_value_question_and_the_answer_it_wants(
    analyze: Analyze, query: str, value_question: bool, answer_type: str
) -> None:
    """A value question may be answered by a fact (a person for "quem", a number for
    "quantos"); the others are answered by quoting."""
    features = analyze(query)
    assert (features.value_question, features.answer_type) == (value_question, answer_type)


@pytest.mark.parametrize(
    ("query", "deictic", "needs_ui_context"),
    [
        ("explique este campo", True, True),  # only the screen: which one?
        ("o que tem nesta aba?", True, True),
        ("Explique o campo validade desta tela", True, False),  # names its subject
        ("O que é APR?", False, False),
    ],
)
def test_a_question_pointing_at_the_screen(
    analyze: Analyze, query: str, deictic: bool, needs_ui_context: bool
) -> None:
    features = analyze(query)
    assert (features.deictic, features.needs_ui_context) == (deictic, needs_ui_context)


def test_frame_words_are_not_searched_and_short_questions_say_so(analyze: Analyze) -> None:
    what_is = analyze("O que é APR?")
    assert what_is.terms == ["apr"] and what_is.short_query and what_is.complexity == "low"
    assert what_is.words == ("o", "que", "é", "apr")  # every word read, for typo repair
    long = analyze("A cada quantos meses a APR deve ser revisada?")
    assert "apr" in long.terms and not long.short_query and long.complexity == "medium"


def test_only_the_first_words_are_analyzed_and_the_cut_is_reported(analyze: Analyze) -> None:
    cut = analyze("um dois tres quatro cinco seis", max_words=3)
    assert cut.truncated and cut.words == ("um", "dois", "tres")
    assert "quatr" not in cut.terms and "seis" not in cut.terms
    assert not analyze("um dois tres", max_words=3).truncated


def test_the_cascade_analyzes_within_its_word_budget(package: KnowledgePackage) -> None:
    config = RouterConfig(budget=RetrievalBudget(max_query_words=2))
    state = query_state(package, "validade da permissão de trabalho", config=config, read=False)
    assert state.features.truncated and state.features.words == ("validade", "da")
    assert state.features.terms == ["validad"]
