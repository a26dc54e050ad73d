"""Hypothetical questions per section, written by an LLM at build time (doc2query).

Why: a user's paraphrase shares no word with the text it needs ("terminei o conserto, o que faço
com a autorização?" vs "Encerramento da Permissão de Trabalho"); questions written in a user's
words and indexed with the section bridge that gap for BM25, as authored ``questions:`` do
(docs/knowledge-format.md). Generated ones are stored the same way, per section
(``Section.questions``: the description field and the vector passage, never a record).

Why through the :class:`~router.ports.Generator` port, unchanged: any LLM the router can already
answer with (Workers AI, an OpenAI-compatible endpoint, a test double) can write them, and the
port's own rules hold — the section is handed over as a delimited ``<knowledge>`` block that is
data, never instructions, and a section flagged as prompt injection is not sent at all. The
model's reply is data too: each line is kept only if it is a question, bounded in length, and
does not read like an instruction (a manipulated model must not plant bait in the index).

Why synchronous over a private loop: the build (``build_knowledge``) is synchronous and may run
inside ``kr build``'s event loop, while a generator is async; the sections are asked one after
the other on a loop of their own thread, as the Workers AI encoder does for vectors.

``kr build --doc2query N`` asks an OpenAI-compatible endpoint (``KR_LLM_BASE_URL``,
``KR_LLM_MODEL``, ``KR_LLM_API_KEY``). Not measurable offline: no LLM runs on these machines.
The effect expected is the one measured for authored questions (bench/README.md,
"Paraphrases"), less whatever the model gets wrong.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from router.contract import AgentKnowledgeContext, KnowledgeChunk, UiContext
from router.errors import ConfigError
from router.knowledge.model import Document, Section
from router.ports import Generator
from router.safety.injection import INJECTION_FLAG, looks_like_injection
from router.stages.context_builder import delimit
from router.support.generation import ABSTAIN_MARKER

__all__ = [
    "DEFAULT_QUESTIONS_PER_SECTION",
    "MAX_QUESTIONS_PER_SECTION",
    "MAX_QUESTION_CHARS",
    "Doc2Query",
    "parse_questions",
    "question_prompt",
]

DEFAULT_QUESTIONS_PER_SECTION = 3
"""Three: doc2query's gains come from the first few questions; more mostly repeat them and
lengthen the description field (BM25F length normalisation)."""
MAX_QUESTIONS_PER_SECTION = 10
MAX_QUESTION_CHARS = 200
"""A longer line is not a question a user types; it is an answer or a rambling reply."""
BUILD_VERSION = "build"
"""The ``knowledge_version`` of the context handed to the generator: none exists yet."""

_PROMPT = (
    "Escreva {n} perguntas diferentes que um usuário faria, com as próprias palavras e sem "
    "repetir os termos do texto, e que o trecho de conhecimento acima responde. Em português, "
    "uma pergunta por linha, sem numeração, sem citações e sem respostas."
)
_BULLET = re.compile(r"^\s*(?:[-*•]+|\(?\d{1,2}[.)\]:-]|[a-z][.)])\s*", re.IGNORECASE)
_CITATION = re.compile(r"\s*\[[^\[\]\n]{1,200}\]")


def question_prompt(count: int) -> str:
    """The request sent as the "question" of a generator call."""
    return _PROMPT.format(n=count)


def parse_questions(text: str, count: int) -> list[str]:
    """The first ``count`` distinct questions of a reply, one a line: bullets, numbering and
    bracketed citations removed; lines that are not questions (no ``?``), too long, the
    abstention marker, or that read like an instruction are dropped."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        question = " ".join(_CITATION.sub("", _BULLET.sub("", line)).split())
        if (
            not question.endswith("?")
            or len(question) > MAX_QUESTION_CHARS
            or ABSTAIN_MARKER.casefold() in question.casefold()
            or looks_like_injection(question)
        ):
            continue
        found.setdefault(question.casefold(), question)
    return list(found.values())[:count]


def _context(doc: Document, section: Section, prompt: str) -> AgentKnowledgeContext:
    """The section alone, as the port expects a retrieved passage: delimited, labelled data."""
    chunk_id = f"{doc.semantic_id}#{section.section_id.split('#')[-1]}"  # as the context builder
    heading = section.heading if section.heading != doc.title else ""
    chunk = KnowledgeChunk(
        chunk_id=chunk_id,
        doc_id=doc.semantic_id,
        section_id=section.section_id,
        heading=section.heading,
        text=section.text,
        delimited=delimit(chunk_id, doc.trust, section.text, doc.title, heading),
        score=1.0,
        trust=doc.trust,
        flags=list(section.flags),
    )
    return AgentKnowledgeContext(
        query=prompt,
        ui_context=UiContext(tenant=None if doc.tenant == "*" else doc.tenant),
        references=[],
        relevant_chunks=[chunk],
        confidence=1.0,
        confidence_level="HIGH",
        knowledge_version=BUILD_VERSION,
    )


@dataclass(frozen=True)
class Doc2Query:
    """A build option: ask ``generator`` for ``per_section`` questions about every section."""

    generator: Generator
    per_section: int = DEFAULT_QUESTIONS_PER_SECTION

    def __post_init__(self) -> None:
        if not 1 <= self.per_section <= MAX_QUESTIONS_PER_SECTION:
            raise ConfigError(
                f"doc2query per_section must be between 1 and {MAX_QUESTIONS_PER_SECTION}, "
                f"not {self.per_section}"
            )

    def write(self, documents: Sequence[Document]) -> int:
        """Fill ``Section.questions`` of every section not flagged as prompt injection (its
        text would be withheld from the model anyway); returns how many questions were kept.
        Blocks until done; safe to call with or without a running event loop."""
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="doc2query") as pool:
            return pool.submit(asyncio.run, self._write_all(documents)).result()

    async def _write_all(self, documents: Sequence[Document]) -> int:
        """Every section in turn; the generator's own HTTP client (if it has one, ``aclose``)
        is closed at the end, since it belongs to this call's loop, which ends with it."""
        prompt = question_prompt(self.per_section)
        kept = 0
        try:
            for doc in documents:
                for section in doc.sections:
                    if INJECTION_FLAG in section.flags or not section.text.strip():
                        continue
                    context = _context(doc, section, prompt)
                    answer = await self.generator.generate(prompt, context)
                    section.questions = parse_questions(answer.text, self.per_section)
                    kept += len(section.questions)
        finally:
            close = getattr(self.generator, "aclose", None)
            if close is not None:
                await close()
        return kept
