"""Stage — exact resolution of ids, section ids, aliases, titles and fact addresses (PRD §7, §13).

Why first: when the question *is* an id ("workPermit.validity") or names one, the answer is known
without ranking; it is also how the UI's focus ("explique este campo") resolves to a section.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from router.analysis.text import fold
from router.package.view import ExactTarget, PackageView
from router.stages.normalizer import NormalizedQuery
from router.trace import DocRef

if TYPE_CHECKING:
    from router.state import QueryState

__all__ = [
    "ExactHit",
    "describe_hit",
    "exact_hits",
    "hit_section",
    "resolve_context",
    "resolve_exact",
]

_LEADING_QUESTION = re.compile(
    r"^(o que (e|sao|significa|quer dizer)|que e|qual (e|o significado de)|explique|explica|"
    r"defina|definicao de|significado de|what is|what are|define)\s+(o |a |os |as |um |uma )?"
)
_ID_LIKE = re.compile(r"[A-Za-z][A-Za-z0-9_-]*(?:[.#][A-Za-z][A-Za-z0-9_-]*)+")


@dataclass(frozen=True)
class ExactHit:
    """A resolved key: which target and through which key and source."""

    target: ExactTarget
    key: str
    source: Literal["exact", "context"]


def resolve_exact(package: PackageView, query: NormalizedQuery) -> list[ExactHit]:
    """Targets named by the whole query, by the query minus a question lead, or by an id in it."""
    keys = [query.folded]
    stripped = _LEADING_QUESTION.sub("", query.folded).strip()
    if stripped and stripped != query.folded:
        keys.append(stripped)
    keys += [fold(m.group()) for m in _ID_LIKE.finditer(query.text)]
    hits: list[ExactHit] = []
    seen: set[tuple[str, int, int | None, str | None]] = set()
    for key in keys:
        for target in package.exact_targets(key):
            ident = (target.kind, target.doc_index, target.section_index, target.fact)
            if ident not in seen:
                seen.add(ident)
                hits.append(ExactHit(target, key, "exact"))
    return hits


def resolve_context(
    package: PackageView, focus: str | None, page: str | None, tab: str | None
) -> list[ExactHit]:
    """What a deictic question ("explique este campo") points at: the focus, else page+tab."""
    if focus:
        targets = package.exact_targets(fold(focus))
        hits = [ExactHit(t, focus, "context") for t in targets if t.kind in ("document", "section")]
        if hits:
            return hits
    if not page:
        return []
    page_key, tab_key = fold(page), fold(tab) if tab else None
    return [
        ExactHit(ExactTarget("document", part.first_doc + doc), page, "context")
        for part in package.parts
        for doc in part.partition.columns.in_scope(page_key, tab_key)
    ]


def exact_hits(state: QueryState) -> list[ExactHit]:
    """Visible targets the query names; for a deictic or termless question ("explique este
    campo"), what the UI context (focus, page, tab) names instead."""
    package, request, visible = state.package, state.request, state.visible
    hits = [h for h in resolve_exact(package, state.query) if h.target.doc_index in visible]
    if not hits and (state.features.deictic or not state.features.terms):
        context = resolve_context(package, request.focus, request.page, request.tab)
        hits = [h for h in context if h.target.doc_index in visible]
    state.trace.stage("exact", hits=[describe_hit(h) for h in hits])
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
