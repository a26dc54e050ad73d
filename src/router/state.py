"""The one object a query carries through the cascade (ADR 0006 lists the stages in order).

It holds the request, its analysis, who may see what, the trace, and the candidates each stage
has found so far.

Why one object: stages used to take eight or nine positional arguments each; with the state they
take one, and a newcomer reads in one place what a query knows at any point of the cascade. The
pipeline (``router.pipeline``) alone fills its candidate fields, in the order of ADR 0006.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field, replace
from functools import cached_property

from router.config import RouterConfig
from router.contract import QueryRequest
from router.errors import RouterError
from router.package.view import PackageView
from router.ranking.bm25 import block_weights
from router.results import (
    Assessment,
    ExactHit,
    GraphNode,
    IndexReads,
    LatencyTier,
    Lexical,
    Mask,
    NormalizedQuery,
    QueryFeatures,
    Ranked,
    Visibility,
    VisibleMasks,
)
from router.trace import Trace

__all__ = ["QueryState", "query_day"]

log = logging.getLogger(__name__)


def query_day(request: QueryRequest, today: str | None) -> str:
    """The ISO day the question is about: the request's date, else ``today``, else the clock's."""
    if request.date is not None:
        return request.date.isoformat()
    return today or dt.date.today().isoformat()


@dataclass
class QueryState:
    """One request on one package (one knowledge version), and what the stages found for it."""

    package: PackageView
    request: QueryRequest
    config: RouterConfig
    trace: Trace
    query: NormalizedQuery
    features: QueryFeatures
    day: str
    tier: LatencyTier = "normal"
    exact: list[ExactHit] = field(default_factory=list)
    lexical: Lexical | None = None
    graph: list[GraphNode] = field(default_factory=list)
    vector: Ranked = field(default_factory=list)
    assessment: Assessment | None = None
    texts: dict[int, str] = field(default_factory=dict)  # section → text, for what is quoted
    unreadable: list[str] = field(default_factory=list)  # codes of index reads that failed
    visible_masks: VisibleMasks | None = None  # the filters stage's (``masks``)

    def seeing(self, reads: IndexReads) -> QueryState:
        """This query as the stage that made ``reads`` sees it next: a copy whose view holds
        them (trace, texts and failures shared). The pipeline alone stores reads on the state
        itself; a stage that reads mid-way (the corrective expansion, the reranker) works on
        such a copy and returns its reads."""
        return replace(self, package=reads.applied_to(self.package))

    def note_unreadable(self, what: str, exc: RouterError) -> str:
        """A read of the index this query could not make (``what``: "posting shards"...):
        logged and kept in ``unreadable``; returns the error's code for the degraded stage's
        trace."""
        log.error("%s of %s unreadable: %s", what, self.package.version, exc.message)
        self.unreadable.append(exc.code)
        return exc.code

    def text(self, section: int) -> str:
        """The text of a section the texts stage read ("" when it could not be read)."""
        return self.texts.get(section, "")

    @cached_property
    def visibility(self) -> Visibility:
        return Visibility(self.request.tenant, self.day, self.request.include_deprecated)

    @property
    def masks(self) -> VisibleMasks:
        """What this caller may see (tenant, validity date, deprecation): the filters stage's
        result, which the cascade always has past the cache."""
        if self.visible_masks is None:
            raise RuntimeError("the filters stage has not run yet")
        return self.visible_masks

    @property
    def visible(self) -> Mask:
        """Documents this caller may see (tenant, validity date, deprecation)."""
        return self.masks.documents

    @property
    def allowed(self) -> Mask | None:
        """Sections this caller may see, or None when it may see every section."""
        return self.masks.sections

    @cached_property
    def block_weights(self) -> dict[str, float]:
        """Weight of each posting block of the package under the configured field weights."""
        return block_weights(self.package.block_names, self.config.field_weights)

    def lexical_result(self) -> Lexical:
        """The lexical stages' result; the cascade always has one past the BM25 stage."""
        if self.lexical is None:
            raise RuntimeError("the lexical stages have not run yet")
        return self.lexical

    def verdict(self) -> Assessment:
        """The confidence assessment; the cascade always has one past the confidence stage."""
        if self.assessment is None:
            raise RuntimeError("the confidence stage has not run yet")
        return self.assessment
