"""Stage — reference resolution: a follow-up completed from the caller's previous question
(an ellipsis, a pronoun), and left as asked when it names its own subject or has no turn
before it. The answers these questions get are in ``test_request_fields.py``."""

from __future__ import annotations

import pytest

from router.contract import MAX_QUERY_CHARS
from router.package.reader import KnowledgePackage
from router.stages.references import Resolution, previous_question, resolve_references
from tests.stages.state import query_state

FIRST = "Qual a validade da APR?"


@pytest.mark.parametrize(
    ("follow_up", "previous", "completed"),
    [
        ("e a da PT?", FIRST, "Qual a validade da PT?"),
        (
            "e na NR-35?",
            "Quem pode trabalhar em altura no andaime?",
            "Quem pode trabalhar em altura na NR-35?",
        ),
        ("e para a PT?", FIRST, "Qual a validade para a PT?"),
    ],
)
def test_an_ellipsis_takes_the_head_of_the_previous_question(
    follow_up: str, previous: str, completed: str
) -> None:
    assert resolve_references(follow_up, previous) == Resolution(completed, "ellipsis", previous)


@pytest.mark.parametrize(
    ("follow_up", "previous", "completed"),
    [
        ("quem aprova ela?", FIRST, "quem aprova APR?"),  # the last prepositional phrase
        ("quem aprova ela?", "Como preencher a PT?", "quem aprova PT?"),  # else the object
        ("qual a validade dela?", "Como preencher a PT?", "qual a validade de PT?"),
    ],
)
def test_a_pronoun_is_replaced_by_the_previous_subject(
    follow_up: str, previous: str, completed: str
) -> None:
    assert resolve_references(follow_up, previous) == Resolution(completed, "pronoun", previous)


@pytest.mark.parametrize(
    ("query", "context"),
    [
        ("e a da PT?", None),  # no turn before
        ("e a da PT?", "assistant: 30 dias."),  # only the assistant spoke
        ("quem aprova a APR?", FIRST),  # names its own subject
        ("e a da PT e da APR e do EPI também?", FIRST),  # too long to be a follow-up
        ("quem aprova ela?", "Preencher PT"),  # the previous turn has no subject to take
    ],
)
def test_a_question_with_nothing_to_complete_is_left_as_asked(
    query: str, context: str | None
) -> None:
    assert resolve_references(query, context) == Resolution(query)


def test_the_previous_question_is_the_callers_last_question() -> None:
    assert previous_question(None) is None and previous_question("") is None
    assert previous_question("assistant: 30 dias.") is None
    turns = f"user: {FIRST}\nassistant: 30 dias.\nuser: obrigado"
    assert previous_question(turns) == FIRST  # a question wins over a later remark
    assert previous_question("pergunta: Qual o prazo?\nQuem aprova a PT?") == "Quem aprova a PT?"
    assert previous_question("user: obrigado\nassistant: de nada") == "obrigado"


def test_a_completed_question_never_exceeds_the_query_limit() -> None:
    previous = "Qual " + "x" * 1985 + " da APR?"
    resolved = resolve_references("e a da " + "P" * 100 + "?", previous)
    assert resolved.rule == "ellipsis" and len(resolved.text) == MAX_QUERY_CHARS


def test_the_cascade_searches_the_completed_question(package: KnowledgePackage) -> None:
    state = query_state(package, "e a da PT?", context=f"user: {FIRST}\nassistant: 30 dias.")
    assert state.query.text == "Qual a validade da PT"  # normalized: no trailing "?"
    assert state.request.query == "e a da PT?"  # the caller's words stay the question asked
    assert {"validad", "pt"} <= set(state.features.terms)
