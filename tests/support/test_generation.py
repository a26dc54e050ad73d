"""Stage — the optional LLM answer: the messages sent, and the check of the answer's citations.

The OpenAI-compatible adapter over a real socket is in ``tests/adapters/test_openai_generator.py``.
"""

from __future__ import annotations

from router.ports import GeneratedAnswer
from router.support.generation import build_messages, check_citations, parse_citations
from tests.common import INJECTION_TEXT, LLM_QUESTION, llm_context


def _answer(text: str, cited: list[str] | None = None) -> GeneratedAnswer:
    return GeneratedAnswer(text=text, cited_ids=cited or [], model="m")


def test_messages_separate_policy_knowledge_and_question() -> None:
    context = llm_context()
    messages = build_messages(LLM_QUESTION, context)

    assert [m["role"] for m in messages] == ["system", "user", "user"]
    system, knowledge, question = (m["content"] for m in messages)
    assert system.startswith(context.policy)
    assert "[doc.id#secao]" in system and "NÃO SEI" in system
    for chunk in context.relevant_chunks:
        assert chunk.text not in system and f'id="{chunk.chunk_id}"' not in system
    assert question == LLM_QUESTION
    assert context.relevant_chunks[0].delimited in knowledge
    assert context.relevant_chunks[1].delimited in knowledge
    assert "omitidos" in knowledge and "injeção" in knowledge


def test_injection_flagged_chunk_text_never_reaches_any_message() -> None:
    messages = build_messages(LLM_QUESTION, llm_context())
    for message in messages:
        assert INJECTION_TEXT not in message["content"]
        assert "revele a senha" not in message["content"]


def test_empty_context_still_has_three_messages() -> None:
    context = llm_context().model_copy(update={"relevant_chunks": []})
    messages = build_messages(LLM_QUESTION, context)
    assert len(messages) == 3 and "nenhum trecho" in messages[1]["content"]


def test_parse_citations_order_dedup_and_noise() -> None:
    text = (
        "Vale 8h [workPermit.validity#prazo] e renova [apr#apr-overview; x:y/z#w]. "
        "De novo [workPermit.validity#prazo]. [NÃO SEI] [ver aqui](http://x) [a b]"
    )
    assert parse_citations(text) == ["workPermit.validity#prazo", "apr#apr-overview", "x:y/z#w"]
    assert parse_citations("sem citações") == []


def test_check_citations_valid() -> None:
    check = check_citations(_answer("Vale 8 horas [workPermit.validity#prazo]."), llm_context())
    assert check.ok and check.valid == ["workPermit.validity#prazo"] and check.unknown == []


def test_check_citations_unknown_id_fails() -> None:
    text = "Vale 8 horas [workPermit.validity#prazo] [outro.doc#secao]."
    check = check_citations(_answer(text), llm_context())
    assert not check.ok
    assert check.valid == ["workPermit.validity#prazo"]
    assert check.unknown == ["outro.doc#secao"]


def test_check_citations_bare_doc_id_maps_to_best_chunk() -> None:
    check = check_citations(_answer("Vale 8 horas [workPermit.validity]."), llm_context())
    assert check.ok and check.valid == ["workPermit.validity#prazo"]


def test_check_citations_withheld_chunk_is_not_citable() -> None:
    check = check_citations(_answer("Veja [apr#apr-overview]."), llm_context())
    assert not check.ok and check.unknown == ["apr#apr-overview"]


def test_check_citations_no_citation_is_not_ok() -> None:
    check = check_citations(_answer("NÃO SEI"), llm_context())
    assert not check.ok and check.valid == [] and check.unknown == []


def test_check_citations_also_reads_cited_ids() -> None:
    check = check_citations(_answer("Vale 8 horas.", cited=["fantasma#x"]), llm_context())
    assert not check.ok and check.unknown == ["fantasma#x"]
