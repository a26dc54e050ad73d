"""Stage — reading the query's terms: their entries from the vocabulary chunks, once per query.

Why a step of its own (index format 3, docs/adr/0010): the vocabulary is not resident; a term's
id (which names its posting shard), its document frequency and the keyword phrases filed under it
come from its chunk. A cold query reads its terms' chunks together with its exact keys (one round
trip), then its posting shards; later stages (keyword phrases, BM25, confidence, typo repair)
read the entries this step read, once the pipeline kept them in ``state.package``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from router.errors import RouterError
from router.package.stores.cost import ReadCost
from router.results import IndexReads

if TYPE_CHECKING:
    from router.state import QueryState

__all__ = ["read_terms"]


async def read_terms(state: QueryState, terms: Iterable[str]) -> tuple[IndexReads, ReadCost]:
    """The entries of ``terms`` not yet read for this query, for the pipeline (or the stage
    that asked, on its own copy of the state) to keep; and what reading them cost.

    A failed read (a store fault, a chunk failing its content check) degrades the query: its
    terms count as unknown to every partition, and ``state.unreadable`` names the error for the
    trace — the query still answers from what it could read, or abstains."""
    wanted = list(terms)
    try:
        found, cost = await state.package.load_terms(wanted)
    except RouterError as exc:
        state.note_unreadable("vocabulary", exc)
        nothing = (None,) * len(state.package.parts)
        found = {t: nothing for t in wanted if t not in state.package.term_found}
        cost = ReadCost(0, 0, 0, 1)
    return IndexReads(terms=found), cost
