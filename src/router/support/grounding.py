"""Which sentence of the retrieved passage answers the question, and which fact it states.

Why the passage decides: fact keys are identifiers, often English camelCase, while questions
are in the knowledge's language; a document with several facts of one kind
(``noticeDaysBefore: 30``, ``paymentDaysBefore: 2``) was answered with whichever key shared a
word with the question. The text that states each value says what it is ("avisar … com 30 dias
de antecedência"), so the answer is the sentence of the passage that best matches the question,
weighted by how specific each of the question's terms is, and a fact answers directly only when
that sentence states its value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass

from router.analysis.analyzer import Analyzer
from router.analysis.text import fold
from router.knowledge.model import FactValue
from router.safety.injection import sentence_flags

__all__ = [
    "HEADING_WEIGHT",
    "ScoredSentence",
    "numbers_in",
    "rank_sentences",
    "states_value",
]

HEADING_WEIGHT = 1.0
"""What a question term found in a sentence's section heading (and not in the sentence) counts,
as in the sentence: the heading says what its sentences are about ("Antecipação automática" →
"A taxa é a mesma, de 1,99%")."""
_LABEL_WORDS = 6

_NUMBER = re.compile(r"(?<![\w.,])\d{1,3}(?:\.\d{3})+(?:,\d+)?(?![\w])|\d+(?:[.,]\d+)?")
_EMPHASIS = re.compile(r"[*_`]+")
_TABLE_RULE = re.compile(r"^\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?$")


@dataclass(frozen=True)
class ScoredSentence:
    """A sentence of a passage, where it is, and how much of the question it holds."""

    section: int  # index of the section in the package
    rank: int  # the section's place among the passage's sections (0: the best ranked)
    position: int  # the sentence's place in its section
    text: str
    score: float
    holds_focus: bool = False  # it holds what the question asks for (``asked_focus``)
    says_focus: bool = False  # in its own words or heading, not only by a fact's name


def rank_sentences(
    analyzer: Analyzer,
    weights: Mapping[str, float],
    passages: Sequence[tuple[int, str, str]],
    stands_for: Callable[[str], Set[str]] | None = None,
    focus: str | None = None,
) -> list[ScoredSentence]:
    """The sentences of ``passages`` (section index, heading, text; best ranked first) that are
    not withheld as injection, best first: by the weight of the question's terms each holds
    (``weights``: term → specificity), counting its heading's terms (:data:`HEADING_WEIGHT`) and
    those ``stands_for`` adds (the names of the facts it states); ties go to the better ranked
    section, then to the earlier sentence. When the question has a ``focus`` (what it asks
    for: ``asked_focus``), a sentence holding it comes before any that does not ("Quem aprova
    a solda?" is answered by the sentence about approving, not by the one about welding). A
    short label ending in a colon ("Peso máximo:") is one sentence with what follows it."""
    scored: list[ScoredSentence] = []
    for rank, (section, heading, text) in enumerate(passages):
        heading_terms = set(analyzer.terms(heading)) if heading else set()
        for position, sentence in enumerate(_sentences(text)):
            terms = set(analyzer.terms(sentence))
            says = focus is not None and (focus in terms or focus in heading_terms)
            if stands_for is not None:
                terms |= stands_for(sentence)
            score = sum(weights.get(t, 0.0) for t in terms)
            score += HEADING_WEIGHT * sum(weights.get(t, 0.0) for t in heading_terms - terms)
            held = focus is not None and (focus in terms or focus in heading_terms)
            scored.append(ScoredSentence(section, rank, position, sentence, score, held, says))
    scored.sort(key=lambda s: (not s.holds_focus, -s.score, s.rank, s.position))
    return scored


def _sentences(text: str) -> list[str]:
    """The text's sentences not withheld, a short label ("Peso máximo:") joined to the next,
    and each table row as one sentence that names its columns (:func:`_rows_with_headers`)."""
    sentences: list[str] = []
    label = ""
    for sentence, withheld in sentence_flags(_rows_with_headers(text)):
        if withheld:
            label = ""
            continue
        if label:
            sentence = f"{label} {sentence}"
            sentences.pop()
        sentences.append(sentence)
        short = len(sentence.split()) <= _LABEL_WORDS and not label
        label = sentence if sentence.endswith(":") and short else ""
    return sentences


def _rows_with_headers(text: str) -> str:
    """A Markdown table's rows rewritten as lines that name their columns ("| Moda | 16% |" under
    "| Categoria | Comissão |" → "Categoria — Moda, Comissão — 16%"), without the header and
    rule rows: a row alone does not say what its numbers are, and a header row is no answer."""
    lines = text.split("\n")
    out: list[str] = []
    header: list[str] | None = None
    for at, line in enumerate(lines):
        stripped = line.strip()
        if not stripped.startswith("|"):
            header = None
            out.append(line)
            continue
        cells = [c.strip() for c in stripped.strip("|").split("|")]
        if _TABLE_RULE.match(stripped):
            continue
        following = lines[at + 1].strip() if at + 1 < len(lines) else ""
        if header is None and _TABLE_RULE.match(following):
            header = cells
            continue
        if header is None:
            out.append(line)
            continue
        named = [f"{h} — {c}" if h else c for h, c in zip(header, cells, strict=False) if c]
        out.append(", ".join(named).rstrip(".") + ".")
    return "\n".join(out)


def numbers_in(text: str) -> list[float]:
    """The numbers a sentence states, read in Portuguese or English notation: "2,99" and "2.99"
    are 2.99, "81.000,00" is 81000, "R$ 6,50" is 6.5."""
    values = []
    for token in _NUMBER.findall(_EMPHASIS.sub("", text)):
        if re.fullmatch(r"\d{1,3}(?:\.\d{3})+(?:,\d+)?", token):
            token = token.replace(".", "").replace(",", ".")
        else:
            token = token.replace(",", ".")
        try:
            values.append(float(token))
        except ValueError:
            continue
    return values


def states_value(sentence: str, value: FactValue) -> bool:
    """Whether ``sentence`` states the fact's value: the same number in any notation, or the
    same text (accents and case aside) as whole words. A yes/no fact states nothing by value."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return any(math.isclose(n, float(value), abs_tol=1e-9) for n in numbers_in(sentence))
    wanted = fold(str(value)).strip()
    if not wanted:
        return False
    plain = fold(_EMPHASIS.sub("", sentence))
    return re.search(rf"(?<!\w){re.escape(wanted)}(?!\w)", plain) is not None
