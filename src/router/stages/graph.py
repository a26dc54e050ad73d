"""Stage — graph expansion over wikilinks and parent/child semantic ids (PRD §14–15).

Why bounded: a knowledge graph is dense; following every edge would drag the whole base into
the context. Only the neighbours of the best few sections are considered (depth 1 by default),
ranked by seed score × relation weight, and at most ``max_nodes`` are kept. The edges are read
per query, for the sections the expansion leaves from (``router.package.stores.graph``); at most
``RetrievalBudget.max_graph_edges`` of them are read and walked, and the walk stops at the
latency deadline (the trace says ``truncated`` / ``budget_exceeded``).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from router.config import DEFAULT_MAX_GRAPH_EDGES
from router.errors import RouterError
from router.package.stores.cost import ReadCost
from router.stages.exact import hit_section
from router.trace import SectionRef, WorkLimit

if TYPE_CHECKING:
    from router.results import GraphNode, Ranked
    from router.state import QueryState

__all__ = [
    "RELATION_WEIGHTS",
    "LoadedEdges",
    "Neighbours",
    "expand",
    "graph_neighbours",
    "graph_seeds",
]

# How strongly a relation suggests the neighbour is relevant too.
RELATION_WEIGHTS = {"link": 1.0, "backlink": 0.7, "parent": 0.6, "child": 0.6}


class Neighbours(Protocol):
    def neighbours(self, section: int) -> dict[int, str]: ...


class LoadedEdges:
    """The edges this query read, by source section (a section not read has none)."""

    def __init__(self, edges: Mapping[int, Mapping[int, str]]) -> None:
        self.edges = edges

    def neighbours(self, section: int) -> dict[int, str]:
        return dict(self.edges.get(section, {}))


def expand(
    graph: Neighbours,
    seeds: Sequence[tuple[int, float]],
    allowed: Collection[int] | None,
    depth: int,
    max_nodes: int,
    limit: WorkLimit | None = None,
) -> list[tuple[int, float, str]]:
    """Neighbours of the seeds (not the seeds themselves), best first: (section, score, via).
    ``limit``: the edges walked (``RetrievalBudget.max_graph_edges``) and the deadline, asked
    before each level past the first; past either, the walk keeps what it reached."""
    if not seeds or max_nodes <= 0 or depth <= 0:
        return []
    limit = limit or WorkLimit(DEFAULT_MAX_GRAPH_EDGES)
    top = max(score for _, score in seeds) or 1.0
    frontier = [(section, score / top) for section, score in seeds]
    found: dict[int, tuple[float, str]] = {}
    visited = {section for section, _ in seeds}
    for level in range(depth):
        if level and limit.expired():  # a deeper level only while the budget lasts
            break
        next_frontier: list[tuple[int, float]] = []
        for section, weight in frontier:
            edges = graph.neighbours(section)
            walked = limit.share(len(edges))
            for neighbour, relation in itertools.islice(edges.items(), walked):
                if neighbour in visited or (allowed is not None and neighbour not in allowed):
                    continue
                score = weight * RELATION_WEIGHTS[relation]
                if score > found.get(neighbour, (0.0, ""))[0]:
                    found[neighbour] = (score, relation)
                    next_frontier.append((neighbour, score))
        if level + 1 < depth:
            visited.update(found)
        frontier = next_frontier
    # the best max_nodes without sorting them all: a hub section has tens of thousands of
    # backlinks at a million sections (9 MB of sort keys and copies for one query before)
    ordered = heapq.nsmallest(max_nodes, found.items(), key=_best_first)
    return [(section, score, relation) for section, (score, relation) in ordered]


def _best_first(item: tuple[int, tuple[float, str]]) -> tuple[float, int]:
    return -item[1][0], item[0]


def graph_seeds(state: QueryState) -> Ranked:
    """The sections to expand from: exact hits (score 1), then the best BM25 sections on the same
    0..1 scale (score / best score), at most ``graph_seeds`` distinct sections."""
    lexical = state.lexical_result()
    seeds: Ranked = []
    best = lexical.bm25[0][1] if lexical.bm25 else 1.0
    lexical_seeds = [(s, v / best) for s, v in lexical.bm25]
    exact_seeds = [(hit_section(state.package, h), 1.0) for h in state.exact]
    for section, score in exact_seeds + lexical_seeds:
        if all(section != seen for seen, _ in seeds):
            seeds.append((section, score))
        if len(seeds) == state.config.graph_seeds:
            break
    return seeds


async def graph_neighbours(state: QueryState) -> list[GraphNode]:
    """Visible neighbours of the seeds, bounded by ``graph_depth`` and the node budget; the edges
    of each level's sections are read first (one round trip a level). A failed read leaves the
    graph out of this query (the trace names the error)."""
    config = state.config
    seeds = graph_seeds(state)
    details: dict[str, object] = {}
    depth, max_edges = config.graph_depth, config.budget.max_graph_edges
    read_limit = WorkLimit(max_edges, state.trace.deadline)
    try:
        edges, reads = await _read_levels(state, [s for s, _ in seeds], depth, read_limit)
    except RouterError as exc:
        edges, reads = {}, ReadCost(0, 0, 0, 0)
        details["error"] = state.note_unreadable("graph edges", exc)
    walk = WorkLimit(max_edges, state.trace.deadline)
    neighbours = expand(
        LoadedEdges(edges), seeds, state.allowed, depth, config.budget.max_graph_nodes, walk
    )
    if reads.round_trips:
        details.update(chunks_fetched=reads.chunks_fetched, bytes_fetched=reads.bytes_fetched)
    for limit in (read_limit, walk):
        details.update(limit.report(state.trace, "graph"))
    state.trace.stage(
        "graph",
        seeds=[SectionRef(s) for s, _ in seeds],
        nodes=[[SectionRef(s), round(v, 3), via] for s, v, via in neighbours],
        **details,
    )
    return neighbours


async def _read_levels(
    state: QueryState, seeds: list[int], depth: int, limit: WorkLimit
) -> tuple[dict[int, dict[int, str]], ReadCost]:
    """The edges of the seeds and, level by level up to ``depth``, of every neighbour reached:
    what ``expand`` can follow (a superset of the sections it does). A level is read only while
    ``limit`` allows the edges read so far (and the deadline has not passed)."""
    edges: dict[int, dict[int, str]] = {}
    reads = ReadCost(0, 0, 0, 0)
    frontier = set(seeds)
    for level in range(depth if seeds else 0):
        if level and (limit.truncated or limit.expired()):  # the seeds' edges are always read
            break
        found, cost = await state.package.load_edges(frontier - set(edges), RELATION_WEIGHTS)
        edges.update(found)
        reads = reads.then(cost)
        limit.take(sum(map(len, found.values())))
        frontier = {t for s in frontier for t in edges.get(s, {})} - set(edges)
        if not frontier:
            break
    return edges, reads
