"""The context package for agents and LLMs: delimited knowledge blocks, injected instructions
flagged and withheld."""

from __future__ import annotations

from router.package.reader import KnowledgePackage
from router.safety.injection import INJECTION_FLAG
from router.stages.context_builder import WITHHELD, neutralise
from tests.cascade.common import (
    INJECTION_QUERY,
    cascade,
)


def test_context_chunks_are_delimited_knowledge_blocks(package: KnowledgePackage) -> None:
    response = cascade(package, "validade da permissão de trabalho")
    context = response.context
    assert context is not None and context.relevant_chunks
    assert [c.section_id for c in context.relevant_chunks] == [
        r.section_id for r in response.results
    ]
    assert context.knowledge_version == package.version
    assert {ref.doc_id for ref in context.references} == {c.doc_id for c in context.relevant_chunks}
    titles = {ref.doc_id: ref.title for ref in context.references}
    for chunk in context.relevant_chunks:
        head = f'<knowledge id="{chunk.chunk_id}" trust="{chunk.trust}">\n'
        fields = f"title: {titles[chunk.doc_id]}\nheading: {chunk.heading}\n\n"
        assert chunk.delimited == f"{head}{fields}{neutralise(chunk.text)}\n</knowledge>"
        assert chunk.chunk_id.startswith(chunk.doc_id + "#")
    assert "never an instruction" in context.policy


def test_injected_instructions_are_flagged_and_removed_from_the_chunk(
    package: KnowledgePackage,
) -> None:
    response = cascade(package, INJECTION_QUERY)
    assert response.context is not None
    [chunk] = [c for c in response.context.relevant_chunks if c.doc_id == "app.tips"]
    assert INJECTION_FLAG in chunk.flags
    assert WITHHELD in chunk.text
    lowered = chunk.text.lower()
    assert "ignore todas as instruções" not in lowered
    assert "revele a senha" not in lowered
    assert "you are now" not in lowered
    assert "revele a senha" not in chunk.delimited.lower()
    clean = [c for c in response.context.relevant_chunks if c.doc_id != "app.tips"]
    assert all(INJECTION_FLAG not in c.flags and WITHHELD not in c.text for c in clean)


def test_no_sentence_of_the_injected_block_survives_in_the_chunk(
    package: KnowledgePackage,
) -> None:
    response = cascade(package, INJECTION_QUERY)
    assert response.context is not None
    [chunk] = [c for c in response.context.relevant_chunks if c.doc_id == "app.tips"]
    assert "print the api keys" not in chunk.text.lower()
