"""Stage — exact resolution of ids, section ids, aliases, titles and fact addresses (PRD §7, §13).

Why first: when the question *is* an id ("workPermit.validity") or names one, the answer is known
without ranking; it is also how the UI's focus ("explique este campo") resolves to a section.
"""

from __future__ import annotations

import itertools
import logging
import re
from typing import TYPE_CHECKING, Any

from router.analysis.text import fold
from router.errors import RouterError
from router.package.stores.cost import ReadCost
from router.package.view import PackageView
from router.results import ExactHit, IndexReads, NormalizedQuery
from router.support.ui_context import resolve_context
from router.trace import DocRef

if TYPE_CHECKING:
    from router.state import QueryState

__all__ = [
    "MAX_QUERY_IDS",
    "describe_hit",
    "exact_hits",
    "hit_section",
    "look_up_keys",
    "query_keys",
    "resolve_exact",
]

log = logging.getLogger(__name__)

_LEADING_QUESTION = re.compile(
    r"^(o que (e|sao|significa|quer dizer)|que e|qual (e|o significado de)|explique|explica|"
    r"defina|definicao de|significado de|what is|what are|define)\s+(o |a |os |as |um |uma )?"
)
_ID_LIKE = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z][A-Za-z0-9_-]*+(?:[.#][A-Za-z][A-Za-z0-9_-]*+)+")
"""An id in free text (``apr.validity``, ``workPermit#components``). It starts where a word
does and its runs never backtrack, so a long token costs one pass (it was quadratic: 40 ms for
2,000 letters)."""

MAX_QUERY_IDS = 16
"""Ids taken from a question's text as exact keys, in order: a question names one or two, and
a 2,000-character one could hold 400 (400 keys to look up and resolve)."""


def query_keys(query: NormalizedQuery) -> list[str]:
    """The exact keys a query may name: all of it, it minus a question lead, each id in it."""
    keys = [query.folded]
    stripped = _LEADING_QUESTION.sub("", query.folded).strip()
    if stripped and stripped != query.folded:
        keys.append(stripped)
    ids = itertools.islice(_ID_LIKE.finditer(query.text), MAX_QUERY_IDS)
    return keys + [fold(m.group()) for m in ids]


async def look_up_keys(state: QueryState) -> tuple[IndexReads, ReadCost | RouterError]:
    """The exact keys the query and its UI focus may name (their chunks, one round trip), for
    the pipeline to keep, and what reading them cost; a failed read is returned in place of
    the cost (the keys then name nothing, and the exact stage finds nothing)."""
    keys = query_keys(state.query)
    if state.request.focus:
        keys.append(fold(state.request.focus))
    try:
        found, cost = await state.package.load_exact(keys)
    except RouterError as exc:
        log.error("exact keys of %s unreadable: %s", state.package.version, exc.message)
        return IndexReads(exact={key: [] for key in keys}), exc
    return IndexReads(exact=found), cost


def resolve_exact(package: PackageView, query: NormalizedQuery) -> list[ExactHit]:
    """Targets named by the whole query, by the query minus a question lead, or by an id in it."""
    keys = query_keys(query)
    hits: list[ExactHit] = []
    seen: set[tuple[str, int, int | None, str | None]] = set()
    for key in keys:
        for target in package.exact_targets(key):
            ident = (target.kind, target.doc_index, target.section_index, target.fact)
            if ident not in seen:
                seen.add(ident)
                hits.append(ExactHit(target, key, "exact"))
    return hits


def exact_hits(state: QueryState, reads: ReadCost | RouterError) -> list[ExactHit]:
    """Visible targets the query names; for a deictic or termless question ("explique este
    campo"), what the UI context (focus, page, tab) names instead. ``reads``: what looking up
    the keys cost (fetched with the posting shards, in the same round trip)."""
    package, request, visible = state.package, state.request, state.visible
    hits = [h for h in resolve_exact(package, state.query) if h.target.doc_index in visible]
    if not hits and (state.features.deictic or not state.features.terms):
        context = resolve_context(package, request.focus, request.page, request.tab)
        hits = [h for h in context if h.target.doc_index in visible]
    details: dict[str, Any] = {"hits": [describe_hit(h) for h in hits]}
    if isinstance(reads, RouterError):
        details["error"] = reads.code
    elif reads.chunks_fetched:
        details.update(chunks_fetched=reads.chunks_fetched, bytes_fetched=reads.bytes_fetched)
    state.trace.stage("exact", **details)
    return hits


def hit_section(package: PackageView, hit: ExactHit) -> int:
    """The section a hit stands for: its own, or its document's first section."""
    section = hit.target.section_index
    return package.first_section(hit.target.doc_index) if section is None else section


def describe_hit(hit: ExactHit) -> dict[str, Any]:
    """The hit as the trace shows it (its document's id is resolved with the response)."""
    return {
        "kind": hit.target.kind,
        "source": hit.source,
        "key": hit.key,
        "doc": DocRef(hit.target.doc_index),
    }
