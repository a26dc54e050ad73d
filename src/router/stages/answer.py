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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from router.analysis.analyzer import Analyzer
from router.contract import AgentKnowledgeContext, Citation, Strategy
from router.knowledge.model import Document, FactValue, Section
from router.ports import Generator
from router.ranking.bm25 import specificity
from router.safety.fields import fact_flagged, heading_flagged, title_flagged
from router.safety.injection import sentence_flags
from router.support.facts import FactMatch, fact_in_sentence, fact_terms, fits
from router.support.generation import check_citations
from router.support.grounding import ScoredSentence, numbers_in, rank_sentences, states_value
from router.support.plain_text import plain_sentence
from router.support.question_frame import asked_focus

if TYPE_CHECKING:
    from router.results import Fused
    from router.state import QueryState

__all__ = [
    "ABSTAIN_MESSAGE",
    "CLARIFY_MESSAGE",
    "WITHHELD_MESSAGE",
    "Answer",
    "Passage",
    "answer_sections",
    "answer_sections_of",
    "answer_title",
    "answering_document",
    "choose_answer",
    "extractive_answer",
    "fact_answer",
    "format_value",
    "named_fact",
    "question_weights",
    "quotable",
    "supporting_sentence",
]

# A fact the question addresses exactly ranks above any fact found by shared words.
EXACT_FACT_OVERLAP = 99
# Characters of a chunk quoted in an LLM answer's citation.
CITED_PASSAGE_CHARS = 300

ABSTAIN_MESSAGE = (
    "Não encontrei na base de conhecimento informação suficiente para responder a esta pergunta."
)
WITHHELD_MESSAGE = (
    "O trecho da base de conhecimento que responderia a esta pergunta foi retido: contém texto "
    "que parece uma instrução a assistentes de IA. Consulte o documento citado nos resultados."
)
WITHHELD_FACT_REASON = (
    "the fact the question asks for reads like an instruction to an AI (possible prompt "
    "injection): it is withheld, and no other fact answers in its place"
)
WITHHELD_TEXT_REASON = (
    "every passage that could answer reads like an instruction to an AI (possible prompt "
    "injection): they are returned as flagged data, never quoted as the answer"
)
CLARIFY_MESSAGE = (
    "A que tela, aba ou campo você se refere? Diga o nome, ou envie a página (page), a aba "
    "(tab) ou o campo em foco (focus) junto com a pergunta."
)
_MAX_PASSAGE_CHARS = 600
TITLE_TERM_WEIGHT = 0.25
CLOSE_SENTENCE_SHARE = 0.75
"""A second sentence is quoted beside the best one only when it holds this share of the best
one's weight of the question: the smallest quote that answers, not the section's lead."""


@dataclass(frozen=True)
class Passage:
    """A quoted piece of a section, ready to become a citation."""

    doc: Document
    section: Section
    text: str
    score: float


def format_value(value: FactValue, decimal: str = ".") -> str:
    """A fact's value as text: yes/no in Portuguese, whole floats without ".0", and the
    decimal separator given (``","`` for a Portuguese reader)."""
    if isinstance(value, bool):
        return "sim" if value else "não"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, float):
        return str(value).replace(".", decimal)
    return str(value)


def answer_title(doc: Document) -> str:
    """How an answer names a document: its title, or its id when the title is flagged."""
    return doc.semantic_id if title_flagged(doc) else doc.title


def quotable(doc: Document, section: Section) -> bool:
    """Whether an extractive answer may quote the section: not when its heading or its
    document's title reads like an instruction (the body may continue it innocently)."""
    return not (heading_flagged(section) or title_flagged(doc))


def fact_answer(doc: Document, value: FactValue, support: str | None, decimal: str = ",") -> str:
    """What a direct answer says: the sentence of the knowledge that states the value, as plain
    text (a list item or table row after its document's title, which it needs to be read
    alone); else the document's title and the value. Never the fact's key: the reader asked in
    words, and the key travels in the response's structured ``fact``."""
    if support:
        plain = plain_sentence(support)
        fragment = support.lstrip().startswith(("|", "-", "*", "+")) or not plain[:1].isupper()
        return f"{answer_title(doc)}: {plain}" if fragment else plain
    return f"{answer_title(doc)}: {format_value(value, decimal)}."


def supporting_sentence(text: str, value: FactValue) -> str | None:
    """The first sentence of a section's text that states the fact's value (in any notation)."""
    for sentence, withheld in sentence_flags(text):
        if not withheld and states_value(sentence, value):
            return sentence
    return None


def extractive_answer(
    analyzer: Analyzer,
    query_terms: Sequence[str] | Mapping[str, float],
    ranked: Sequence[tuple[Document, Section, str, float]],
    max_sentences: int,
    focus: str | None = None,
) -> tuple[str, list[Passage]]:
    """Quote the sentence of the ranked sections (document, section, its text, score) that holds
    the most of the question — its terms weighted by how specific they are (``query_terms`` as
    term → weight, e.g. their idf in the caller's view; a plain list weighs each term 1) — and
    up to ``max_sentences`` in all that hold nearly as much (:data:`CLOSE_SENTENCE_SHARE`), as
    plain text, each section's sentences in text order and cited once; a sentence holding the
    question's ``focus`` comes first (``rank_sentences``). Nothing when the best sentence is in
    a section that may not be quoted (its heading or title reads like an instruction): a lesser
    sentence in its place would answer something else."""
    wanted = (
        dict(query_terms) if isinstance(query_terms, Mapping) else dict.fromkeys(query_terms, 1.0)
    )
    scored = rank_sentences(
        analyzer,
        wanted,
        [(n, _context_heading(doc, sec), text) for n, (doc, sec, text, _) in enumerate(ranked)],
        focus=focus,
    )
    allowed = [s for s in scored if quotable(ranked[s.section][0], ranked[s.section][1])]
    best = next((s for s in scored if plain_sentence(s.text)), None)
    if best is not None and best.score > 0 and best not in allowed:
        return "", []  # what answers is withheld: never a lesser sentence in its place
    chosen = _chosen_sentences(allowed, max(1, max_sentences))
    if not chosen:
        return "", []
    passages: list[Passage] = []
    quoted: list[str] = []
    for n in dict.fromkeys(s.section for s in chosen):
        doc, section, _, score = ranked[n]
        text = " ".join(plain_sentence(s.text) for s in chosen if s.section == n)
        passages.append(Passage(doc, section, text[:_MAX_PASSAGE_CHARS], score))
        quoted.append(f"{passages[-1].text} [{len(passages)}]")
    lead = passages[0]
    heading = f", seção “{lead.section.heading}”" if lead.section.heading != lead.doc.title else ""
    return f"Segundo “{answer_title(lead.doc)}”{heading}: " + " ".join(quoted), passages


def _context_heading(doc: Document, section: Section) -> str:
    """The heading that tells what a section's sentences are about: none when it only repeats
    the document's title (every section of the document is about that)."""
    return "" if section.heading == doc.title else section.heading


def _chosen_sentences(scored: Sequence[ScoredSentence], limit: int) -> list[ScoredSentence]:
    """The best sentence and, up to ``limit``, those scoring at least
    :data:`CLOSE_SENTENCE_SHARE` of it, in reading order (section rank, then position); the
    first sentence of the best ranked section when none holds any of the question."""
    plain = [s for s in scored if plain_sentence(s.text)]
    if not plain:
        return []
    best = plain[0].score
    if best <= 0:
        chosen = [min(plain, key=lambda s: (s.rank, s.position))]
    else:
        lead = plain[0]
        chosen = [
            s
            for s in plain
            if s.holds_focus == lead.holds_focus and s.score >= CLOSE_SENTENCE_SHARE * best
        ][:limit]
    return sorted(chosen, key=lambda s: (s.rank, s.position))


@dataclass(frozen=True)
class Answer:
    """The answer text, its citations, the strategy that produced it, the fact it states, and
    why it was withheld when the knowledge that answers reads like an injection."""

    text: str
    citations: list[Citation]
    strategy: Strategy
    fact: FactMatch | None = None
    withheld: str | None = None


def named_fact(state: QueryState) -> FactMatch | None:
    """The fact the question names by its address (``apr.defaultValidityDays``), as the exact
    stage resolved it: it answers whatever the question's words (never when abstaining), or,
    when it is flagged as prompt injection, withholds the answer (never another fact in its
    place). The pipeline reads it before the texts, so that its document's sections are read
    too."""
    if state.verdict().abstain:
        return None
    for hit in state.exact:
        target = hit.target
        if target.kind != "fact" or target.fact is None:
            continue
        doc = state.package.documents[target.doc_index]
        return FactMatch(target.doc_index, target.fact, doc.facts[target.fact], EXACT_FACT_OVERLAP)
    return None


async def choose_answer(
    state: QueryState,
    candidates: Sequence[Fused],
    named: FactMatch | None,
    context: AgentKnowledgeContext,
    generator: Generator | None,
) -> Answer:
    """Abstain → decline; a named fact, or a fact the passage's best sentence states → direct
    answer; else extractive, replaced by the LLM's answer when the request asks for one, a
    generator is configured and its citations check out."""
    abstained = state.verdict().abstain
    answer = _grounded_answer(state, candidates, named, abstained)
    if state.request.generate and not abstained and answer.fact is None:
        answer = await _generated(state, context, generator, answer)
    fact = answer.fact
    state.trace.stage("answer", kind=answer.strategy, fact=fact.name if fact else None)
    return answer


def answering_document(state: QueryState, candidates: Sequence[Fused]) -> int | None:
    """The document an answer comes from: the one an exact key of the question resolved (not
    one the UI context merely points at), else the top-ranked result's."""
    for hit in state.exact:
        if hit.source == "exact":
            return hit.target.doc_index
    if not candidates:
        return None
    return state.package.section_doc[candidates[0].section]


def answer_sections(
    state: QueryState, candidates: Sequence[Fused], named: FactMatch | None
) -> list[int]:
    """The sections an answer may quote (none when abstaining): the passage and, for a named
    fact, its document's sections."""
    if state.verdict().abstain:
        return []
    sections = _passage(state, candidates)
    if named is not None:
        sections += answer_sections_of(state, named.doc_index)
    return list(dict.fromkeys(sections))


def _grounded_answer(
    state: QueryState, candidates: Sequence[Fused], named: FactMatch | None, abstained: bool
) -> Answer:
    if abstained:
        if state.verdict().clarify:
            return Answer(CLARIFY_MESSAGE, [], "clarify_first")
        return Answer(ABSTAIN_MESSAGE, [], "safe_decline")
    if named is not None:
        if fact_flagged(state.package.documents[named.doc_index], named.name):
            return Answer(WITHHELD_MESSAGE, [], "safe_decline", withheld=WITHHELD_FACT_REASON)
        return _direct_answer(state, _stated(state, named))
    passage = _passage(state, candidates)
    fact = _grounded_fact(state, passage)
    if fact is not None:
        return _direct_answer(state, fact)
    return _extractive(state, candidates, passage)


def _passage(state: QueryState, candidates: Sequence[Fused]) -> list[int]:
    """The sections an answer may quote: the answering document's sections among the first
    ``answer_sections`` candidates, best first (the top result's document when the resolved
    one has none there), then its other sections in reading order, at most
    ``answer_document_sections`` in all (:func:`answer_sections_of`).

    Why one document: a second document's sentence quoted after the first read as part of one
    answer ("... até 12 horas [1] ... no máximo 8 horas [2]"), and a fact of the third result
    sharing a word with the question answered about the wrong document; the other documents
    stay in the results and the context package. Why its other sections: the section that
    states the value is often not the one ranked first ("A validade máxima é de 7 dias" under
    "Prazo máximo", below the document's lead)."""
    top = candidates[: state.config.answer_sections]
    section_doc = state.package.section_doc
    for doc_index in (answering_document(state, top), section_doc[top[0].section] if top else None):
        ranked = [c.section for c in top if section_doc[c.section] == doc_index]
        if ranked and doc_index is not None:
            return answer_sections_of(state, doc_index, ranked)
    return []


def answer_sections_of(state: QueryState, doc_index: int, ranked: Sequence[int] = ()) -> list[int]:
    """``ranked`` (sections of the document, best first), then the document's other sections
    in reading order, at most ``answer_document_sections`` in all: what the texts stage reads
    for an answer from that document, and what the answer may quote."""
    sections = list(dict.fromkeys([*ranked, *state.package.doc_sections(doc_index)]))
    return sections[: max(len(ranked), state.config.answer_document_sections)]


def _grounded_fact(state: QueryState, passage: Sequence[int]) -> FactMatch | None:
    """The fact the passage's best-matching sentence states, of the kind the question asks
    for — only for a value question, never at LOW confidence: a sentence that holds the
    question best and states a fact's value is the evidence that the fact is the one asked for
    (of a document's several facts of one kind, the passage decides, not the key's name: the
    name counts only as words of the sentence that states its value). When the best sentence
    states no value at all, the best sentence holding the question's focus in its own words
    that states one answers ("Qual a validade da PT?": not the definition of validity, the
    sentence with its 7 days)."""
    features, package = state.features, state.package
    if not passage or not features.value_question or state.verdict().level == "LOW":
        return None
    doc_index = package.section_doc[passage[0]]
    facts = _answerable_facts(state, doc_index)
    scored = _ranked_sentences(state, passage, stands_for=_names_stated(state, facts))
    best = [s for s in scored if s.score > 0 and _ties(s, scored[0])]
    for sentence in best:
        fact = fact_in_sentence(package, doc_index, sentence, features.terms, facts)
        if fact is not None:
            return fact
    if not best or any(_states_any(s.text, facts) or numbers_in(s.text) for s in best):
        return None
    # The best sentence states no value at all ("A validade de uma PT é o período em que…"):
    # it cannot answer a value question; the best one about the same focus that does, may.
    for sentence in scored:
        if sentence.says_focus and sentence.score > 0:
            fact = fact_in_sentence(package, doc_index, sentence, features.terms, facts)
            if fact is not None:
                return fact
    return None


def _states_any(sentence: str, facts: Mapping[str, FactValue]) -> bool:
    return any(states_value(sentence, value) for value in facts.values())


def _ties(sentence: ScoredSentence, best: ScoredSentence) -> bool:
    return (sentence.holds_focus, sentence.score) == (best.holds_focus, best.score)


def _answerable_facts(state: QueryState, doc_index: int) -> dict[str, FactValue]:
    """The document's facts that may answer: not flagged as injection, of the kind the question
    asks for, and not a value the question itself states ("abaixo de R$ 79" asks for the fee,
    not for the 79)."""
    doc = state.package.documents[doc_index]
    asked = state.query.text
    return {
        name: value
        for name, value in doc.facts.items()
        if not fact_flagged(doc, name)
        and fits(value, state.features.answer_type)
        and not states_value(asked, value)
    }


def _names_stated(state: QueryState, facts: Mapping[str, FactValue]) -> Callable[[str], set[str]]:
    """For a sentence, the stems of the names of the facts whose value it states."""
    analyzer = state.package.analyzer
    names = {name: fact_terms(analyzer, name) for name in facts}

    def stands_for(sentence: str) -> set[str]:
        stated: set[str] = set()
        for name, value in facts.items():
            if states_value(sentence, value):
                stated |= names[name]
        return stated

    return stands_for


def _stated(state: QueryState, fact: FactMatch) -> FactMatch:
    """A named fact with the sentence of its document that states it and best matches the
    question (its name's words count as the question's), when one does."""
    package = state.package
    weights = question_weights(
        state, fact.doc_index, sorted(fact_terms(package.analyzer, fact.name))
    )
    sections = answer_sections_of(state, fact.doc_index)
    for sentence in _ranked_sentences(state, sections, weights):
        if states_value(sentence.text, fact.value):
            return replace(fact, section=sentence.section, sentence=sentence.text)
    return fact


def _ranked_sentences(
    state: QueryState,
    sections: Sequence[int],
    weights: Mapping[str, float] | None = None,
    stands_for: Callable[[str], set[str]] | None = None,
) -> list[ScoredSentence]:
    """The quotable sections' sentences, best match of the question first (a heading that only
    repeats the document's title says nothing about its sentences)."""
    package = state.package
    passages = []
    for index in sections:
        doc = package.documents[package.section_doc[index]]
        section = package.sections[index]
        if quotable(doc, section):
            passages.append((index, _context_heading(doc, section), state.text(index)))
    if weights is None:
        weights = question_weights(state, package.section_doc[sections[0]] if sections else None)
    focus = asked_focus(package.analyzer, state.query.folded)
    return rank_sentences(package.analyzer, weights, passages, stands_for, focus)


def _direct_answer(state: QueryState, fact: FactMatch) -> Answer:
    """The fact, said by the sentence that states it and cited to its section (else its
    document's first section)."""
    package = state.package
    doc = package.documents[fact.doc_index]
    section = package.sections[fact.section] if fact.section is not None else doc.sections[0]
    decimal = "," if package.analyzer.config.language == "portuguese" else "."
    citation = Citation(
        doc_id=doc.semantic_id,
        section_id=section.section_id,
        passage=plain_sentence(fact.sentence)
        if fact.sentence
        else format_value(fact.value, decimal),
        score=1.0,
    )
    text = fact_answer(doc, fact.value, fact.sentence, decimal)
    return Answer(text, [citation], "direct_answer", fact)


def _extractive(state: QueryState, candidates: Sequence[Fused], passage: Sequence[int]) -> Answer:
    """Quoted from the passage (the answering document's sections, best ranked first), each
    citation scored as its section was ranked (0 for a section the ranking did not reach)."""
    package, config = state.package, state.config
    ranked_score = {c.section: c.final for c in candidates}
    ranked = [
        (
            package.documents[package.section_doc[index]],
            package.sections[index],
            state.text(index),
            ranked_score.get(index, 0.0),
        )
        for index in passage
    ]
    text, passages = extractive_answer(
        package.analyzer,
        question_weights(state, package.section_doc[passage[0]] if passage else None),
        ranked,
        config.answer_sentences,
        asked_focus(package.analyzer, state.query.folded),
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
    if not text:  # everything that could be quoted is withheld: say so, and decline
        return Answer(WITHHELD_MESSAGE, [], "safe_decline", withheld=WITHHELD_TEXT_REASON)
    return Answer(text, citations, _extractive_strategy(state))


def question_weights(
    state: QueryState, doc_index: int | None = None, extra: Sequence[str] = ()
) -> dict[str, float]:
    """Each question term's weight in choosing a sentence of document ``doc_index``
    (:func:`specificity`), the words of the document's title (but the question's focus)
    :data:`TITLE_TERM_WEIGHT` times — they chose the document, and say nothing about which of
    its sentences answers ("Por quantas horas vale a permissão de espaço confinado?" asks about
    the hours, in the document about confined spaces)."""
    package = state.package
    weights = specificity(package, state.features.terms)
    floor = min(weights.values(), default=1.0)
    for term in extra:  # not looked up for this query: as the least specific of its terms
        weights.setdefault(term, floor)
    focus = asked_focus(package.analyzer, state.query.folded)
    if doc_index is not None:
        for term in set(package.analyzer.terms(package.documents[doc_index].title)):
            if term in weights and term != focus:
                weights[term] *= TITLE_TERM_WEIGHT
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
