"""Stage — the answer (PRD §33): decline, a direct fact, an extractive quote, or a checked LLM one.

Why extractive before any LLM: every sentence of the answer is quoted from a retrieved section
and cited, so nothing is invented; sentences that read like instructions (prompt injection) are
never quoted into the answer — their section stays a cited, flagged data source. Nor is any other
flagged field (``router.safety.fields``): a flagged fact never answers, a section whose heading or
document title is flagged is never quoted, and a flagged title is named by its document id. An
LLM answer is asked for only by the request (``generate``) and kept only if every id it cites was
retrieved.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from router.analysis.analyzer import Analyzer
from router.contract import AgentKnowledgeContext, Citation, Strategy
from router.knowledge.model import Document, FactValue, Section
from router.package.view import PackageView
from router.ports import Generator
from router.safety.fields import fact_flagged, heading_flagged, title_flagged
from router.safety.injection import sentence_flags
from router.support.facts import FactMatch, best_fact
from router.support.generation import check_citations

if TYPE_CHECKING:
    from router.results import Fused
    from router.state import QueryState

__all__ = [
    "ABSTAIN_MESSAGE",
    "CLARIFY_MESSAGE",
    "Answer",
    "Passage",
    "answer_title",
    "answering_document",
    "choose_answer",
    "extractive_answer",
    "fact_answer",
    "format_value",
    "pick_fact",
    "quotable",
    "specificity",
    "supporting_sentence",
]

# A fact the question addresses exactly ranks above any fact found by shared words.
EXACT_FACT_OVERLAP = 99
# Characters of a chunk quoted in an LLM answer's citation.
CITED_PASSAGE_CHARS = 300

ABSTAIN_MESSAGE = (
    "Não encontrei na base de conhecimento informação suficiente para responder a esta pergunta."
)
CLARIFY_MESSAGE = (
    "A que tela, aba ou campo você se refere? Diga o nome, ou envie a página (page), a aba "
    "(tab) ou o campo em foco (focus) junto com a pergunta."
)
_MAX_PASSAGE_CHARS = 600


@dataclass(frozen=True)
class Passage:
    """A quoted piece of a section, ready to become a citation."""

    doc: Document
    section: Section
    text: str
    score: float


def format_value(value: FactValue) -> str:
    if isinstance(value, bool):
        return "sim" if value else "não"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def answer_title(doc: Document) -> str:
    """How an answer names a document: its title, or its id when the title is flagged."""
    return doc.semantic_id if title_flagged(doc) else doc.title


def quotable(doc: Document, section: Section) -> bool:
    """Whether an extractive answer may quote the section: not when its heading or its
    document's title reads like an instruction (the body may continue it innocently)."""
    return not (heading_flagged(section) or title_flagged(doc))


def fact_answer(doc: Document, name: str, value: FactValue, support: str | None) -> str:
    """ "<title> — <fact>: <value>." plus the sentence of the document that states it."""
    answer = f"{answer_title(doc)} — {name}: {format_value(value)}."
    if support:
        answer += f" {support}"
    return answer


def supporting_sentence(text: str, value: FactValue) -> str | None:
    """The first sentence of a section's text that states the fact's value."""
    needle = format_value(value).casefold()
    for sentence, withheld in sentence_flags(text):
        if needle in sentence.casefold() and not withheld:
            return sentence
    return None


def extractive_answer(
    analyzer: Analyzer,
    query_terms: Sequence[str] | Mapping[str, float],
    ranked: Sequence[tuple[Document, Section, str, float]],
    max_sentences: int,
) -> tuple[str, list[Passage]]:
    """Quote the sentences of the best sections (document, section, its text, score) that hold
    the most of the question: its terms weighted by how specific they are (``query_terms`` as
    term → weight, e.g. their idf in the caller's view; a plain list weighs each term 1)."""
    wanted = (
        dict(query_terms) if isinstance(query_terms, Mapping) else dict.fromkeys(query_terms, 1.0)
    )
    passages: list[Passage] = []
    quoted: list[str] = []
    for doc, section, text, score in ranked:
        if not quotable(doc, section):
            continue
        chosen = _best_sentences(analyzer, wanted, text, max(1, max_sentences - len(quoted)))
        if not chosen:
            continue
        text = " ".join(chosen)[:_MAX_PASSAGE_CHARS]
        passages.append(Passage(doc, section, text, score))
        quoted.append(f"{text} [{len(passages)}]")
        if len(quoted) >= max_sentences:
            break
    if not passages:
        return "", []
    lead = passages[0]
    heading = f", seção “{lead.section.heading}”" if lead.section.heading != lead.doc.title else ""
    return f"Segundo “{answer_title(lead.doc)}”{heading}: " + " ".join(quoted), passages


def _best_sentences(
    analyzer: Analyzer, wanted: Mapping[str, float], text: str, limit: int
) -> list[str]:
    """The ``limit`` sentences holding the most weight of the question's terms (ties: the
    earlier), in text order; the first sentence when none holds any."""
    sentences = [s for s, withheld in sentence_flags(text) if not withheld]
    if not sentences:
        return []
    scored = []
    for position, sentence in enumerate(sentences):
        overlap = sum(wanted.get(term, 0.0) for term in set(analyzer.terms(sentence)))
        scored.append((overlap, -position, sentence))
    scored.sort(reverse=True)
    best = [s for s in scored[:limit] if s[0] > 0] or [(0, 0, sentences[0])]
    best.sort(key=lambda item: -item[1])
    return [sentence for _, _, sentence in best]


@dataclass(frozen=True)
class Answer:
    """The answer text, its citations, the strategy that produced it, and the fact it states."""

    text: str
    citations: list[Citation]
    strategy: Strategy
    fact: FactMatch | None = None


def pick_fact(state: QueryState, candidates: Sequence[Fused]) -> FactMatch | None:
    """The fact that answers the question directly, if any (never when abstaining)."""
    return None if state.verdict().abstain else _fact(state, candidates)


async def choose_answer(
    state: QueryState,
    candidates: Sequence[Fused],
    fact: FactMatch | None,
    context: AgentKnowledgeContext,
    generator: Generator | None,
) -> Answer:
    """Abstain → decline; a fact → direct answer; else extractive, replaced by the LLM's answer
    when the request asks for one, a generator is configured and its citations check out."""
    abstained = state.verdict().abstain
    answer = _grounded_answer(state, candidates, fact, abstained)
    if state.request.generate and not abstained and fact is None:
        answer = await _generated(state, context, generator, answer)
    state.trace.stage("answer", kind=answer.strategy, fact=fact.name if fact else None)
    return answer


def _fact(state: QueryState, candidates: Sequence[Fused]) -> FactMatch | None:
    """A fact the exact stage resolved, else (value questions, never at LOW confidence) the
    best-matching fact of the answering document: the one the question resolved exactly, or
    else the top-ranked one.

    Why that document only: a fact of the third result that shares a word with the question
    ("... para 8 horas" and another document's ``maxValidityHours: 8``) answered at HIGH
    confidence about the wrong document while the ranking was right; when the answering
    document holds no matching fact, the answer is extractive from the top section."""
    package = state.package
    for hit in state.exact:
        if hit.target.kind == "fact" and hit.target.fact is not None:
            doc = package.documents[hit.target.doc_index]
            if fact_flagged(doc, hit.target.fact):
                continue
            return FactMatch(
                hit.target.doc_index,
                hit.target.fact,
                doc.facts[hit.target.fact],
                EXACT_FACT_OVERLAP,
            )
    if not state.features.value_question or state.verdict().level == "LOW":
        return None
    doc_index = answering_document(state, candidates)
    if doc_index is None:
        return None
    return best_fact(package, [doc_index], state.features.terms, state.features.answer_type)


def answering_document(state: QueryState, candidates: Sequence[Fused]) -> int | None:
    """The document a direct answer may come from: the one an exact key of the question
    resolved (not one the UI context merely points at), else the top-ranked result's."""
    for hit in state.exact:
        if hit.source == "exact":
            return hit.target.doc_index
    if not candidates:
        return None
    return state.package.section_doc[candidates[0].section]


def _grounded_answer(
    state: QueryState, candidates: Sequence[Fused], fact: FactMatch | None, abstained: bool
) -> Answer:
    if abstained:
        if state.verdict().clarify:
            return Answer(CLARIFY_MESSAGE, [], "clarify_first")
        return Answer(ABSTAIN_MESSAGE, [], "safe_decline")
    if fact is not None:
        return _direct_answer(state, fact)
    return _extractive(state, candidates)


def _direct_answer(state: QueryState, fact: FactMatch) -> Answer:
    """The fact, cited to the first section that states its value (else the first section)."""
    doc = state.package.documents[fact.doc_index]
    stated = [
        (sec, supporting_sentence(state.text(index), fact.value))
        for index, sec in zip(state.package.doc_sections(fact.doc_index), doc.sections, strict=True)
    ]
    section, support = next(((sec, s) for sec, s in stated if s), (doc.sections[0], None))
    citation = Citation(
        doc_id=doc.semantic_id,
        section_id=section.section_id,
        passage=support or f"{fact.name}: {fact.value}",
        score=1.0,
    )
    text = fact_answer(doc, fact.name, fact.value, support)
    return Answer(text, [citation], "direct_answer", fact)


def _extractive(state: QueryState, candidates: Sequence[Fused]) -> Answer:
    """Quoted from the top result's document only (its sections among the first
    ``answer_sections`` candidates): a second document's sentence quoted after the first read
    as part of one answer ("... até 12 horas [1] ... no máximo 8 horas [2]"); the other
    documents stay in the results and the context package."""
    package, config, features = state.package, state.config, state.features
    top = candidates[: config.answer_sections]
    lead_doc = package.section_doc[top[0].section] if top else None
    ranked = [
        (
            package.documents[package.section_doc[c.section]],
            package.sections[c.section],
            state.text(c.section),
            c.final,
        )
        for c in top
        if package.section_doc[c.section] == lead_doc
    ]
    text, passages = extractive_answer(
        package.analyzer, specificity(package, features.terms), ranked, config.answer_sentences
    )
    citations = [
        Citation(
            doc_id=p.doc.semantic_id,
            section_id=p.section.section_id,
            passage=p.text,
            score=round(p.score, 6),
        )
        for p in passages
    ]
    return Answer(text or ABSTAIN_MESSAGE, citations, _extractive_strategy(state))


def specificity(package: PackageView, terms: Sequence[str]) -> dict[str, float]:
    """Each query term's weight in choosing a sentence: its BM25 idf in the caller's view, so
    the question's specific concept ("estagiário") outweighs its common words ("empresa",
    "prazo"); a term the view does not know weighs as the rarest would."""
    total = max(1, package.section_total)
    weights = {}
    for term in dict.fromkeys(terms):
        df = package.document_frequency(term) if package.knows(term) else 0
        weights[term] = math.log(1.0 + (total - df + 0.5) / (df + 0.5))
    return weights


def _extractive_strategy(state: QueryState) -> Strategy:
    """An action request is for the agent; at the ``quality`` tier an answer the vectors or
    the reranker shaped is ``enriched_rag``; else ``simple_rag``."""
    if state.features.potential_action:
        return "multi_backend_agent"
    enriched = state.trace.ran("vector") or state.trace.ran("rerank")
    return "enriched_rag" if state.tier == "quality" and enriched else "simple_rag"


async def _generated(
    state: QueryState,
    context: AgentKnowledgeContext,
    generator: Generator | None,
    fallback: Answer,
) -> Answer:
    """The LLM's answer when configured; kept only if every citation is a retrieved chunk."""
    if generator is None:
        state.trace.skip("generate", "no generator configured")
        return fallback
    generated = await generator.generate(state.request.query, context)
    check = check_citations(generated, context)
    state.trace.stage(
        "generate",
        model=generated.model,
        cited=generated.cited_ids,
        valid=check.valid,
        unknown=check.unknown,
        accepted=check.ok,
    )
    if not check.ok:
        return fallback
    chunks = {c.chunk_id: c for c in context.relevant_chunks}
    citations = [
        Citation(
            doc_id=chunks[i].doc_id,
            section_id=chunks[i].section_id,
            passage=chunks[i].text[:CITED_PASSAGE_CHARS],
            score=chunks[i].score,
        )
        for i in check.valid
    ]
    return Answer(generated.text, citations, "enriched_rag")
