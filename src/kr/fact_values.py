"""The values a golden fact question's answer must state: its ``fact`` (``document.factName``)
read from the knowledge version it is asked of.

Why: the ranking metrics say whether the right document came first, not whether the answer
text stated the right value — and a direct answer that picks another fact of the right
document ("avisar com 30 dias" answered with ``paymentDaysBefore: 2``) is the worst kind of
wrong. A fact question passes when its answer states one of the values the fact has in a
document version the asker sees on the question's day (a versioned rule answers by date).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from kr.golden import GoldenQuery
from router.knowledge.model import Document, FactValue
from router.stages.answer import format_value
from router.support.grounding import states_value

__all__ = ["FactValues", "fact_values_of", "states_one_of"]

FactValues = Callable[[GoldenQuery, str], list[str] | None]
"""``values(query, day)``: what its answer may state (None: it asks for no fact)."""


def fact_values_of(documents: Sequence[Document]) -> FactValues:
    """The values of each fact by the documents that hold it (every version, every tenant),
    picked per question by what it sees on its day."""
    by_id: dict[str, list[Document]] = {}
    for doc in documents:
        by_id.setdefault(doc.semantic_id, []).append(doc)

    def values(query: GoldenQuery, day: str) -> list[str] | None:
        if not query.fact:
            return None
        doc_id, _, name = query.fact.rpartition(".")
        tenant = query.request.tenant
        asked_on = query.request.date.isoformat() if query.request.date else day
        seen = [d for d in by_id.get(doc_id, []) if d.visible_to(tenant) and d.valid_on(asked_on)]
        return [format_value(d.facts[name]) for d in seen if name in d.facts]

    return values


def states_one_of(answer: str, values: Sequence[str]) -> bool:
    """Whether ``answer`` states one of ``values``: a number in any notation as a whole number
    ("30" in "**30 dias**", not "3" in "30"; "2.99" in "2,99%", "81000" in "R$ 81.000,00",
    "6.5" in "R$ 6,50"), a text as whole words, accents and case aside."""
    return any(states_value(answer, _typed(v)) for v in values)


def _typed(value: str) -> FactValue:
    """A value read back from its text: a number when it is one."""
    return float(value) if re.fullmatch(r"-?\d+(?:\.\d+)?", value) else value
