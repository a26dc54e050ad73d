"""A question about "this field" with no UI context is answered with a question, not a guess;
the words that only frame a question ("onde encontro", "o que significa") never outrank its
subject."""

from __future__ import annotations

import pytest

from router.adapters.local.vector_index import LocalVectorIndex
from router.contract import QueryRequest, QueryResponse
from router.package.reader import KnowledgePackage
from router.pipeline import CascadeServices, run_cascade, run_query
from router.sync import run_sync
from router.vectors.hash_embedder import HashEmbedder
from tests.common import TODAY

SCREEN_ONLY = [
    "Explique este campo",
    "O que significa isso?",
    "Para que serve esta tela?",
    "O que faço aqui?",
    "Explique o campo",
]


def ask(package: KnowledgePackage, query: str, **context: str) -> QueryResponse:
    return run_query(package, QueryRequest(query=query, **context), today=TODAY)  # type: ignore[arg-type]


@pytest.mark.parametrize("query", SCREEN_ONLY)
def test_a_question_about_the_screen_without_its_context_asks_which(
    package: KnowledgePackage, query: str
) -> None:
    response = ask(package, query)
    assert response.strategy_used == "clarify_first"
    assert response.abstained and response.results == [] and response.citations == []
    assert response.abstention_reason and "no page, tab or focus" in response.abstention_reason
    assert "?" in response.answer  # it asks


def test_with_the_ui_context_the_same_question_is_answered(package: KnowledgePackage) -> None:
    response = ask(package, "Explique este campo", page="certificates")
    assert response.strategy_used != "clarify_first" and not response.abstained
    assert response.results[0].doc_id == "app.page.certificates"


def test_a_close_vector_match_never_turns_a_clarification_into_a_guess(
    vpackage: KnowledgePackage, vindex: LocalVectorIndex
) -> None:
    services = CascadeServices(embedder=HashEmbedder(), vector_index=vindex)
    request = QueryRequest(query="Explique este campo")
    response = run_sync(run_cascade(vpackage, request, services=services, today=TODAY))
    assert response.strategy_used == "clarify_first" and response.results == []
    assert not response.metadata.fallback_triggered


def test_a_deictic_question_that_names_its_subject_is_searched(package: KnowledgePackage) -> None:
    response = ask(package, "Explique o campo validade desta tela")
    assert response.strategy_used != "clarify_first"
    assert "validad" in response.analysis.terms


@pytest.mark.parametrize(
    ("query", "doc_id"),
    [
        ("Onde encontro os componentes?", "workPermit.components"),
        ("Onde encontro o histórico da permissão?", "app.page.workPermit.history"),
        ("o que significa ASO?", "certificate.aso"),
        ("para que serve o CA do EPI?", "epi.ca"),
    ],
)
def test_frame_words_never_outrank_the_subject(
    package: KnowledgePackage, query: str, doc_id: str
) -> None:
    response = ask(package, query)
    assert response.results and response.results[0].doc_id == doc_id
    assert not {"onde", "encontr", "signif", "serv"} & set(response.analysis.terms)


def test_a_question_of_frame_words_only_keeps_them(package: KnowledgePackage) -> None:
    """Nothing else to search with: the frame words are searched rather than nothing."""
    assert ask(package, "onde encontro?").analysis.terms
