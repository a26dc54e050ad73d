"""Stage — vector fallback (PRD §16–17): nearest sections by meaning, through the ports.

Why only a fallback: embedding a query costs far more than the lexical stages, so the pipeline
calls this stage only when lexical confidence is LOW or MEDIUM (decision 2, docs/adr). A package's
vectors are only comparable with query vectors of the same model: any other model is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from router.errors import EmbeddingModelError
from router.package.view import PackageView
from router.ports import Embedder, VectorIndex
from router.trace import TRACE_TOP_N, SectionRef
from router.vectors.records import query_namespaces

if TYPE_CHECKING:
    from router.results import Ranked
    from router.state import QueryState

__all__ = [
    "MAX_EMBED_CHARS",
    "check_model",
    "embedded_text",
    "vector_fallback",
    "vector_search",
    "vector_skip_reason",
]


def check_model(package: PackageView, embedder: Embedder) -> None:
    """Refuse to compare vectors of different models."""
    if package.embedding_model is None:
        raise EmbeddingModelError(f"knowledge version {package.version} has no section vectors")
    if package.embedding_model != embedder.model_id:
        raise EmbeddingModelError(
            f"knowledge version {package.version} was embedded with {package.embedding_model!r}; "
            f"the query embedder is {embedder.model_id!r}"
        )


MAX_EMBED_CHARS = 200
"""Characters of a question the embedder reads (the golden set's longest is 82); a question
of 2,000 characters cost the local e5 model 1.4 s of CPU (its cost grows with its tokens)."""
MAX_EMBED_WORD_CHARS = 40
"""Longer "words" (random tokens, base64) carry no meaning an embedder could use."""


def embedded_text(text: str) -> str:
    """The part of a question sent to the embedder: its words of a plausible length, up to
    ``MAX_EMBED_CHARS`` — so the vector stage's cost is bounded whatever the question."""
    words = [w for w in text.split() if len(w) <= MAX_EMBED_WORD_CHARS]
    kept = " ".join(words)[:MAX_EMBED_CHARS]
    return kept.rsplit(" ", 1)[0] if len(kept) == MAX_EMBED_CHARS and " " in kept else kept


async def vector_search(
    package: PackageView,
    embedder: Embedder,
    index: VectorIndex,
    text: str,
    tenant: str | None,
    top_k: int,
) -> list[tuple[int, float]]:
    """(section, cosine similarity) best first, from the shared and the tenant's namespaces."""
    check_model(package, embedder)
    asked = embedded_text(text)
    if not asked:  # nothing an embedder could read
        return []
    [vector] = await embedder.embed([asked], "query")
    versions = package.vector_versions
    wanted = {"$eq": versions[0]} if len(versions) == 1 else {"$in": list(versions)}
    matches = []
    for namespace in query_namespaces(tenant):
        matches += await index.query(
            vector, top_k=top_k, namespace=namespace, filter={"version": wanted}
        )
    found: dict[int, float] = {}
    for match in matches:
        owner, colon, number = match.id.partition(":")
        if colon and owner in versions and number.isdigit():
            section = package.view_section(int(number))
            if section is not None:  # a vector of this view (ids are package-wide numbers)
                found[section] = max(match.score, found.get(section, -1.0))
    return sorted(found.items(), key=lambda item: (-item[1], item[0]))[:top_k]


def vector_skip_reason(
    state: QueryState, embedder: Embedder | None, index: VectorIndex | None
) -> str | None:
    """Why the vector stage does not run for this query, or None when it runs (decision 2:
    after a LOW or MEDIUM lexical result, or a lexical abstention whatever its level — too
    little of the question covered can still be HIGH — unless ``always_vector``)."""
    if embedder is None or index is None:
        return "no embedder or vector index configured"
    if state.package.embedding_model is None:
        return "package has no section vectors"
    if state.tier == "fast":
        return "latency tier fast: lexical stages only"
    if state.config.always_vector:
        return None
    if not state.config.vector_fallback:
        return "vector fallback disabled"
    if state.exact:
        return "exact hit"
    if state.verdict().clarify:
        return "the question needs the UI context"
    if state.verdict().level == "HIGH" and not state.verdict().abstain:
        return "lexical confidence HIGH"
    return None


async def vector_fallback(state: QueryState, embedder: Embedder, index: VectorIndex) -> Ranked:
    """Nearest sections the caller may see, at most ``vector_top_k`` (and the budget's cap)."""
    package, config = state.package, state.config
    limit = min(config.vector_top_k, config.budget.max_vector_results)
    found = await vector_search(
        package, embedder, index, state.query.text, state.request.tenant, limit
    )
    allowed = state.allowed
    visible = [(s, v) for s, v in found if allowed is None or s in allowed]
    state.trace.stage(
        "vector",
        model=embedder.model_id,
        level_before=state.verdict().level,
        matches=[[SectionRef(s), round(v, 4)] for s, v in visible[:TRACE_TOP_N]],
    )
    return visible
