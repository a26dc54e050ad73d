"""Stage — answer without an LLM: a direct fact, or an extractive quote with citations (§33).

Why extractive: every sentence of the answer is quoted from a retrieved section and cited, so
nothing is invented; sentences that read like instructions (prompt injection) are never quoted
into the answer — their section stays a cited, flagged data source.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from router.analysis.analyzer import Analyzer
from router.knowledge.model import Document, FactValue, Section
from router.safety.injection import looks_like_injection, split_sentences

__all__ = [
    "ABSTAIN_MESSAGE",
    "Passage",
    "extractive_answer",
    "fact_answer",
    "format_value",
    "supporting_sentence",
]

ABSTAIN_MESSAGE = (
    "Não encontrei na base de conhecimento informação suficiente para responder a esta pergunta."
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


def fact_answer(doc: Document, name: str, value: FactValue, support: str | None) -> str:
    """ "<title> — <fact>: <value>." plus the sentence of the document that states it."""
    answer = f"{doc.title} — {name}: {format_value(value)}."
    if support:
        answer += f" {support}"
    return answer


def supporting_sentence(section: Section, value: FactValue) -> str | None:
    """The first sentence of the section that states the fact's value."""
    needle = format_value(value).casefold()
    for sentence in split_sentences(section.text):
        if needle in sentence.casefold() and not looks_like_injection(sentence):
            return sentence
    return None


def extractive_answer(
    analyzer: Analyzer,
    query_terms: Sequence[str],
    ranked: Sequence[tuple[Document, Section, float]],
    max_sentences: int,
) -> tuple[str, list[Passage]]:
    """Quote the sentences of the best sections that share most terms with the question."""
    wanted = set(query_terms)
    passages: list[Passage] = []
    quoted: list[str] = []
    for doc, section, score in ranked:
        chosen = _best_sentences(analyzer, wanted, section, max(1, max_sentences - len(quoted)))
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
    return f"Segundo “{lead.doc.title}”{heading}: " + " ".join(quoted), passages


def _best_sentences(
    analyzer: Analyzer, wanted: set[str], section: Section, limit: int
) -> list[str]:
    sentences = [s for s in split_sentences(section.text) if not looks_like_injection(s)]
    if not sentences:
        return []
    scored = []
    for position, sentence in enumerate(sentences):
        overlap = len(wanted & set(analyzer.terms(sentence)))
        scored.append((overlap, -position, sentence))
    scored.sort(reverse=True)
    best = [s for s in scored[:limit] if s[0] > 0] or [(0, 0, sentences[0])]
    best.sort(key=lambda item: -item[1])
    return [sentence for _, _, sentence in best]
