"""Stage — reranking the fused top-N (PRD §2–3, seed 001 §6; docs/adr/0015).

Why after fusion and only when unsure: a reranker reads the question together with each
passage, which first-stage scores cannot, but it costs a section text read per candidate and a
model call. So it runs on the fused top-N only (``rerank_candidates``, 20), only when the
confidence is not HIGH (nor an exact hit, nor an abstention: there is nothing to reorder), and
only while the latency budget lasts; its own call is bounded by ``rerank_timeout_ms`` (PRD §3:
retrieval + reranking < 300 ms). What the reranker says is one more per-source score
(``rerank``, in ``scores`` like ``bm25`` or ``vector``); the new order is a reciprocal-rank
blend of the fused and the reranker's ranks (``rerank_weight``), and each slot keeps its fused
``final`` score, so scores still decrease down the list.

Why it never fails a query: a reranker is a refinement. A failure, a timeout or an answer of
the wrong shape is traced (``rerank.degraded``) and the fused order is kept.

Why the candidates are filtered again: the reranker may be a remote service, so it is shown
only sections this caller may see (the fused list holds nothing else; this is the belt to that
brace), and a section flagged as a prompt injection is shown by its title and heading only.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, cast

from router.errors import RerankError, RouterError
from router.knowledge.model import Document
from router.package.stores.cost import ReadCost
from router.ports import Reranker
from router.results import Fused, IndexReads
from router.safety.injection import INJECTION_FLAG
from router.stages.context_builder import shown_heading, shown_title
from router.stages.vector import embedded_text
from router.sync import bounded, concurrently
from router.trace import TRACE_TOP_N, SectionRef
from router.vectors.passages import passage_text

if TYPE_CHECKING:
    from router.state import QueryState

__all__ = [
    "RERANK_SOURCE",
    "blend",
    "candidate_passages",
    "rerank_candidates",
    "rerank_skip_reason",
    "scores_by_index",
]

log = logging.getLogger(__name__)

RERANK_SOURCE = "rerank"
"""The name of the reranker's score among a candidate's per-source scores."""


def rerank_skip_reason(state: QueryState, reranker: Reranker | None) -> str | None:
    """Why the rerank stage does not run for this query, or None when it runs."""
    if reranker is None:
        return "no reranker configured"
    if state.tier == "fast":
        return "latency tier fast: lexical stages only"
    verdict = state.verdict()
    if verdict.abstain:
        return "abstaining"
    if state.exact:
        return "exact hit"
    if verdict.level == "HIGH" and not state.config.always_rerank:
        return "confidence HIGH"
    return None


def _visible_head(state: QueryState, fused: Sequence[Fused]) -> list[Fused]:
    """The first ``rerank_candidates`` candidates this caller may see."""
    allowed, visible = state.allowed, state.visible
    section_doc = state.package.section_doc
    return [
        f
        for f in fused[: state.config.rerank_candidates]
        if (allowed is None or f.section in allowed) and section_doc[f.section] in visible
    ]


async def candidate_passages(
    state: QueryState, sections: Sequence[int]
) -> tuple[IndexReads, ReadCost]:
    """The records and texts of ``sections`` (one round trip, records and texts concurrently;
    those already read are not read again, and once kept the records stage will not read these
    again), and what reading them cost."""
    view = state.package
    docs = sorted({view.section_doc[s] for s in sections} - set(view.loaded))
    missing = [s for s in sections if s not in state.texts]
    records, texts = await concurrently([view.load_records(docs), view.texts.load(missing)])
    found, record_cost = cast("tuple[dict[int, Document], ReadCost]", records)
    quoted, text_cost = cast("tuple[dict[int, str], ReadCost]", texts)
    return IndexReads(records=found, texts=quoted), record_cost.alongside(text_cost)


def _passage(state: QueryState, section: int, read: Mapping[int, str]) -> str:
    """What the reranker reads of a section: title › heading, then its text (the vector
    stage's passage, so a cached passage vector is reused), cut to ``rerank_passage_chars``;
    ``read``: the texts this stage read (the others were read before it)."""
    view = state.package
    doc = view.documents[view.section_doc[section]]
    record = view.sections[section]
    if INJECTION_FLAG in record.flags:  # the body is data no model should read
        title, heading = shown_title(doc), shown_heading(doc, record)
        text = title if heading == title else f"{title} › {heading}"
    else:
        body = read[section] if section in read else state.text(section)
        text = passage_text(doc, dataclasses.replace(record, text=body))
    return text[: state.config.rerank_passage_chars]


def scores_by_index(pairs: Sequence[tuple[object, object]], count: int, who: str) -> list[float]:
    """One score per passage from (index, score) pairs as rerank APIs return them (best first,
    maybe fewer than asked): an index outside the passages, or a score that is not a finite
    number, is a :class:`RerankError`; a passage left out scores below every scored one."""
    scores: dict[int, float] = {}
    for index, raw in pairs:
        if isinstance(index, float) and index.is_integer():  # a JSON or JS number
            index = int(index)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            raise RerankError(f"{who} answered an index {index!r} outside 0..{count - 1}")
        number = isinstance(raw, int | float) and not isinstance(raw, bool)
        score = float(raw) if number else math.nan  # type: ignore[arg-type]
        if not math.isfinite(score):
            raise RerankError(f"{who} answered a score {raw!r} that is not a finite number")
        scores.setdefault(index, score)
    if not scores:
        raise RerankError(f"{who} scored none of the {count} passages")
    floor = min(scores.values()) - 1.0
    return [scores.get(i, floor) for i in range(count)]


def blend(head: Sequence[Fused], scores: Sequence[float], weight: float, k: int) -> list[Fused]:
    """``head`` reordered by ``(1 - weight) / (k + fused rank) + weight / (k + reranker rank)``
    (ties: fused order); each candidate gets its ``rerank`` score, each slot keeps its
    ``final``. ``weight`` 1 is the reranker's order alone."""
    by_score = sorted(range(len(head)), key=lambda i: (-scores[i], i))
    rerank_rank = {i: rank for rank, i in enumerate(by_score, start=1)}
    value = {
        i: (1.0 - weight) / (k + i + 1) + weight / (k + rerank_rank[i]) for i in range(len(head))
    }
    order = sorted(range(len(head)), key=lambda i: (-value[i], i))
    return [
        Fused(head[i].section, slot.final, {**head[i].scores, RERANK_SOURCE: round(scores[i], 6)})
        for i, slot in zip(order, head, strict=True)
    ]


async def rerank_candidates(
    state: QueryState, fused: list[Fused], reranker: Reranker
) -> tuple[list[Fused], IndexReads]:
    """The fused list with its visible top-N reordered by ``reranker`` — or the fused list
    itself when it cannot be (traced as ``rerank``: skipped, or ``degraded`` with the reason) —
    and the records and texts it read for the passages (for the pipeline to keep)."""
    trace = state.trace
    head = _visible_head(state, fused)
    if len(head) < 2:
        trace.skip("rerank", "fewer than two candidates")
        return fused, IndexReads()
    sections = [f.section for f in head]
    try:
        found, reads = await candidate_passages(state, sections)
        seen = state.seeing(found)
        passages = [_passage(seen, s, found.texts) for s in sections]
    except RouterError as exc:
        return _degraded(state, fused, reranker, exc.code, exc.message), IndexReads()
    reordered = await _reordered(state, head, passages, reranker)
    if isinstance(reordered, tuple):  # (code, message): the fused order is kept
        return _degraded(state, fused, reranker, *reordered), found
    old_rank = {f.section: rank for rank, f in enumerate(head, start=1)}
    trace.stage(
        "rerank",
        model=reranker.model,
        level_before=state.verdict().level,
        candidates=len(head),
        moved=sum(a.section != b.section for a, b in zip(head, reordered, strict=True)),
        ranking=[
            [SectionRef(f.section), f.scores[RERANK_SOURCE], old_rank[f.section]]
            for f in reordered[:TRACE_TOP_N]
        ],
        chunks_fetched=reads.chunks_fetched,
        bytes_fetched=reads.bytes_fetched,
        round_trips=reads.round_trips,
    )
    taken = set(sections)
    return reordered + [f for f in fused if f.section not in taken], found


async def _reordered(
    state: QueryState, head: list[Fused], passages: list[str], reranker: Reranker
) -> list[Fused] | tuple[str, str]:
    """``head`` reordered by the reranker's scores of ``passages``; a failure (an error, no
    answer within ``rerank_timeout_ms``, or scores that do not fit) as its (code, message)."""
    config = state.config
    question = embedded_text(state.query.text) or state.query.text[: config.rerank_passage_chars]
    try:
        scores = await bounded(reranker.rerank(question, passages), config.rerank_timeout_ms / 1000)
    except TimeoutError:
        return "rerank_timeout", f"no answer within {config.rerank_timeout_ms:g} ms"
    except RouterError as exc:
        return exc.code, exc.message
    if len(scores) != len(head) or not all(math.isfinite(s) for s in scores):
        message = f"{len(scores)} scores for {len(head)} passages, or one not finite"
        return RerankError.code, message
    return blend(head, scores, config.rerank_weight, config.rrf_k)


def _degraded(
    state: QueryState, fused: list[Fused], reranker: Reranker, code: str, message: str
) -> list[Fused]:
    """The fused order kept, and the trace saying why."""
    log.warning("rerank with %s degraded (%s): %s", reranker.model, code, message)
    state.trace.stage(
        "rerank", model=reranker.model, degraded=code, reason=message, kept="fused order"
    )
    return fused
