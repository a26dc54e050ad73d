"""Stage — reading the records of the documents a response shows, cites or names (ADR 0010).

Why a stage after fusion: in format 3 a document's title, facts and its sections' ids, headings
and flags are not resident; until fusion the stages work on numbers and the trace records
references (``router.trace.SectionRef``). Once the ranking is known, the cascade knows every
document it will need — those it shows, those an answer may quote or take a fact from, and
those its trace names — and reads them in one round trip, a bounded number per query. A failed
read (store outage, a chunk that fails its hash) makes the query abstain with that reason, and
never fails it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from router.errors import RouterError
from router.stages.answer import FACT_DOCS_CONSIDERED

if TYPE_CHECKING:
    from router.stages.fusion import Fused
    from router.state import QueryState

__all__ = ["load_records", "needed_documents"]

log = logging.getLogger(__name__)


def needed_documents(state: QueryState, shown: Sequence[Fused], fused: Sequence[Fused]) -> set[int]:
    """Documents the response may read: of the shown and quoted sections, of the first
    candidates a fact may come from, of the exact hits, and every one the trace names."""
    view = state.package
    sections, docs = state.trace.references()
    sections.update(f.section for f in shown)
    sections.update(f.section for f in fused[: state.config.answer_sections])
    docs.update(hit.target.doc_index for hit in state.exact)
    fact_docs: list[int] = []
    for candidate in fused:
        if len(fact_docs) == FACT_DOCS_CONSIDERED:
            break
        doc = view.section_doc[candidate.section]
        if doc not in fact_docs:
            fact_docs.append(doc)
    docs.update(fact_docs)
    docs.update(view.section_doc[s] for s in sections)
    return docs


async def load_records(state: QueryState, docs: set[int]) -> bool:
    """Make the records of ``docs`` readable through ``state.package``; traced as ``records``
    with what the read cost. False when the store could not give them."""
    try:
        found, cost = await state.package.load_records(docs)
    except RouterError as exc:
        log.error("document records of %s unreadable: %s", state.package.version, exc.message)
        state.trace.stage("records", documents=len(docs), error=exc.code)
        return False
    state.package = state.package.with_records(found)
    state.trace.stage(
        "records",
        documents=cost.sections,
        chunks_fetched=cost.chunks_fetched,
        bytes_fetched=cost.bytes_fetched,
        round_trips=cost.round_trips,
    )
    return True
