"""Stage — reading the records of the documents a response shows, cites or names (ADR 0010).

Why a stage after fusion: in format 3 a document's title, facts and its sections' ids, headings
and flags are not resident; until fusion the stages work on numbers and the trace records
references (``router.trace.SectionRef``). Once the ranking is known, the cascade knows every
document it will need — those it shows, those an answer may quote or take a fact from, and
those its trace names — and reads them in one round trip, a bounded number per query. A failed
read (store outage, a chunk that fails its hash) makes the query abstain with that reason, and
never fails it. Most of them are read earlier, beside the graph's edges (``likely_shown``,
docs/adr/0030): this stage then reads only what the graph, the vectors or the fusion added.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from router.errors import RouterError
from router.knowledge.model import Document
from router.package.stores.cost import ReadCost
from router.results import IndexReads
from router.stages.confidence import confidence_level
from router.stages.exact import hit_section
from router.stages.topk import shown_k
from router.sync import concurrently

if TYPE_CHECKING:
    from router.results import Fused
    from router.state import QueryState

__all__ = [
    "documents_of",
    "early_sections",
    "likely_shown",
    "load_records",
    "needed_documents",
    "read_records",
]

T = TypeVar("T")

log = logging.getLogger(__name__)


def early_sections(state: QueryState, shown: Sequence[Fused], fused: Sequence[Fused]) -> list[int]:
    """Sections whose texts are read with the records: the shown ones and those an extractive
    answer quotes (the fact's other sections, known only once its record is read, come later)."""
    sections = {f.section for f in shown}
    sections.update(f.section for f in fused[: state.config.answer_sections])
    return sorted(sections)


GRAPH_STAGE = "graph"


def needed_documents(state: QueryState, shown: Sequence[Fused], fused: Sequence[Fused]) -> set[int]:
    """Documents the response may read: of the shown and quoted sections, of the top
    candidate (a fact may come from it), of the exact hits, and every one the trace names but
    the graph's neighbours. Why not those: they are known only once the graph's edges are read,
    so naming the ones the response does not show would cost a cold query one more round trip
    after them (issue 32, item 3); the trace names a neighbour whose record is held, any other
    as null (docs/adr/0030)."""
    view = state.package
    sections, docs = state.trace.references(skip=(GRAPH_STAGE,))
    sections.update(f.section for f in shown)
    sections.update(f.section for f in fused[: state.config.answer_sections])
    docs.update(hit.target.doc_index for hit in state.exact)
    if fused:  # the document a fact may answer from (``answering_document``)
        docs.add(view.section_doc[fused[0].section])
    docs.update(view.section_doc[s] for s in sections)
    return docs


async def load_records(
    state: QueryState, docs: set[int], sections: Sequence[int], stage: str = "records"
) -> IndexReads | None:
    """The records of ``docs`` and the texts of ``sections`` (those the response shows and
    quotes), read in the same round trip, for the pipeline to keep; traced as ``stage`` with
    what both reads cost. None when the records could not be read (a failed text read is left
    to the texts stage to report)."""
    reads, details = await read_records(state, docs, sections)
    state.trace.stage(stage, **details)
    return reads


async def read_records(
    state: QueryState, docs: set[int], sections: Sequence[int]
) -> tuple[IndexReads | None, dict[str, Any]]:
    """``load_records``'s reads and the details its trace records, the trace left to the
    caller (a read made beside another stage is traced after it, in a fixed order)."""
    view = state.package
    docs = {d for d in docs if d not in view.loaded}  # the rerank stage may have read some
    sections = [s for s in sections if s not in state.texts]
    records, texts = await concurrently(
        [_outcome(view.load_records(docs)), _outcome(view.texts.load(sections))]
    )
    if isinstance(records, RouterError):
        log.error("document records of %s unreadable: %s", view.version, records.message)
        return None, {"documents": len(docs), "error": records.code}
    found, cost = cast("tuple[dict[int, Document], ReadCost]", records)
    details: dict[str, Any] = {"documents": cost.sections}
    quoted: dict[int, str] = {}
    if isinstance(texts, RouterError):
        details["texts_error"] = texts.code
    else:
        quoted, text_cost = cast("tuple[dict[int, str], ReadCost]", texts)
        details["texts"] = text_cost.sections
        cost = cost.alongside(text_cost)
    details.update(
        chunks_fetched=cost.chunks_fetched,
        bytes_fetched=cost.bytes_fetched,
        round_trips=cost.round_trips,
    )
    return IndexReads(records=found, texts=quoted), details


def likely_shown(state: QueryState) -> list[int]:
    """The sections the response will most likely show, known before the graph and vector
    stages: the exact hits, then the BM25 ranking, as many as the lexical result's level gives
    (``shown_k``). Why: their records and texts are read beside the graph's edges, so on a
    cold query the records are not one more round trip in the chain (issue 32, item 3); what
    the graph, the vectors or the fusion add is read after fusion, and only that."""
    lexical, config = state.lexical_result(), state.config
    level = "HIGH" if state.exact else confidence_level(lexical.confidence.value, config)
    k = shown_k(level, config, state.request.top_k)
    sections: list[int] = []
    for section in [hit_section(state.package, h) for h in state.exact] + [
        s for s, _ in lexical.bm25
    ]:
        if section not in sections:
            sections.append(section)
        if len(sections) == k:
            break
    return sections


def documents_of(state: QueryState, sections: Sequence[int]) -> set[int]:
    """The documents of ``sections``, of the exact hits and of every section the trace names
    so far: what ``needed_documents`` will ask for, known before the graph."""
    view = state.package
    named, docs = state.trace.references()
    docs.update(view.section_doc[s] for s in named.union(sections))
    docs.update(hit.target.doc_index for hit in state.exact)
    return docs


async def _outcome(job: Awaitable[T]) -> T | RouterError:
    try:
        return await job
    except RouterError as exc:
        return exc
