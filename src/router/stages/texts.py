"""Stage — reading the texts of the sections a response quotes, and only those (ADR 0010).

Why a stage: in format 3 section texts are not resident; after ranking, the cascade knows which
sections it will show, quote in the answer and cite for a fact, and reads just their chunks.
A failed read (store outage, a chunk that fails its hash) degrades the response — ranked
results without quotes — and never fails the query.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from router.errors import RouterError

if TYPE_CHECKING:
    from router.results import Fused
    from router.state import QueryState

__all__ = ["load_texts", "quoted_sections"]

log = logging.getLogger(__name__)


def quoted_sections(shown: Sequence[Fused], answer: Sequence[int]) -> list[int]:
    """Sections whose text the response may use: the shown ones and those the answer may quote
    (``router.stages.answer.answer_sections``)."""
    return sorted({*(f.section for f in shown), *answer})


async def load_texts(state: QueryState, sections: list[int]) -> dict[int, str]:
    """The texts of ``sections``, with those the records stage already read; traced as
    ``texts`` with what reading the others cost."""
    if not sections:
        state.trace.skip("texts", "nothing to quote")
        return state.texts
    missing = [s for s in sections if s not in state.texts]
    try:
        texts, cost = await state.package.texts.load(missing)
    except RouterError as exc:
        log.error("section texts of %s unreadable: %s", state.package.version, exc.message)
        state.trace.stage("texts", sections=len(sections), error=exc.code)
        return state.texts
    state.trace.stage(
        "texts",
        sections=len(sections),
        chunks_fetched=cost.chunks_fetched,
        bytes_fetched=cost.bytes_fetched,
        round_trips=cost.round_trips,
    )
    return {**state.texts, **texts}
