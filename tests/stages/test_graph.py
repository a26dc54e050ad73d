"""Stage — graph expansion: depth, decay, node budget and the allowed sections."""

from __future__ import annotations

import asyncio

import pytest

from router.compile.build import BuildResult
from router.contract import QueryRequest
from router.errors import PackageFormatError
from router.package.format.graph import (
    GRAPH_NAME,
    RELATIONS,
    GraphTable,
    decode_graph_directory,
    encode_graph_chunks,
)
from router.package.reader import KnowledgePackage, load_package
from router.package.stores.graph import GraphTables, PartitionGraph
from router.pipeline import CascadeServices, run_cascade
from router.stages.graph import RELATION_WEIGHTS, LoadedEdges, expand
from router.sync import run_sync
from tests.common import TODAY


def synthetic_graph(edges: dict[int, dict[int, str]]) -> GraphTable:
    """A compiled graph table holding exactly ``edges``."""
    ordered = sorted((s, t, r) for s, targets in edges.items() for t, r in targets.items())
    return GraphTable(
        [s for s, _, _ in ordered],
        [t for _, t, _ in ordered],
        bytes(RELATIONS.index(r) for _, _, r in ordered),
    )


# 0 → 1 (link), 0 → 2 (backlink); 1 → 0 (backlink), 1 → 3 (link); 2 → 4 (child); 3 → 5 (link)
GRAPH = {
    0: {1: "link", 2: "backlink"},
    1: {0: "backlink", 3: "link"},
    2: {4: "child"},
    3: {5: "link"},
}


def test_expand_depth_one_returns_ranked_direct_neighbours_only() -> None:
    found = expand(synthetic_graph(GRAPH), [(0, 4.0)], None, depth=1, max_nodes=10)
    assert found == [(1, 1.0, "link"), (2, RELATION_WEIGHTS["backlink"], "backlink")]


def test_expand_depth_two_reaches_neighbours_of_neighbours_with_decayed_scores() -> None:
    found = expand(synthetic_graph(GRAPH), [(0, 4.0)], None, depth=2, max_nodes=10)
    child = RELATION_WEIGHTS["backlink"] * RELATION_WEIGHTS["child"]
    assert found == [(1, 1.0, "link"), (3, 1.0, "link"), (2, 0.7, "backlink"), (4, child, "child")]
    assert 5 not in [section for section, _, _ in found]  # three hops away


def test_expand_respects_max_nodes_and_never_returns_seeds() -> None:
    graph = synthetic_graph(GRAPH)
    found = expand(graph, [(0, 1.0), (1, 0.5)], None, depth=3, max_nodes=2)
    assert len(found) == 2
    assert not {0, 1} & {section for section, _, _ in found}
    assert [score for _, score, _ in found] == sorted((s for _, s, _ in found), reverse=True)
    assert expand(graph, [(0, 1.0)], None, depth=1, max_nodes=0) == []
    assert expand(graph, [(0, 1.0)], None, depth=0, max_nodes=10) == []
    assert expand(graph, [], None, depth=1, max_nodes=10) == []


def test_expand_stays_inside_the_allowed_sections() -> None:
    found = expand(synthetic_graph(GRAPH), [(0, 1.0)], {0, 1, 3}, depth=2, max_nodes=10)
    assert [section for section, _, _ in found] == [1, 3]


def test_expand_on_the_knowledge_graph_respects_the_bounds(package: KnowledgePackage) -> None:
    view = package.view(None)
    edges, _ = run_sync(view.load_edges(range(view.num_sections), RELATION_WEIGHTS))
    graph = LoadedEdges(edges)
    seed = max(range(view.num_sections), key=lambda s: len(graph.neighbours(s)))
    assert len(graph.neighbours(seed)) > 3
    found = expand(graph, [(seed, 2.0)], None, depth=2, max_nodes=3)
    assert len(found) == 3 and seed not in [s for s, _, _ in found]
    assert [s for s, _, _ in found] == [s for s, _, _ in sorted(found, key=lambda f: -f[1])]


def test_edges_in_many_chunks_read_back_exactly() -> None:
    """Every section's edges come back from their chunk, a section's edges never split."""
    edges = sorted(
        {(s, (s * 7 + k) % 500, k % len(RELATIONS)) for s in range(0, 500, 3) for k in range(s % 5)}
    )
    files = encode_graph_chunks(edges, chunk_bytes=64)
    directory = decode_graph_directory(files[GRAPH_NAME])
    assert len(directory.hashes) > 20 and directory.edges == len(edges)

    async def fetch(name: str) -> bytes:
        return files[name.partition(".")[2]]

    store = PartitionGraph("shared", directory, fetch, GraphTables(1 << 24))
    found, cost = run_sync(store.neighbours_of(range(-1, 502)))
    expected: dict[int, dict[int, str]] = {}
    for source, target, kind in edges:
        expected.setdefault(source, {})[target] = RELATIONS[kind]
    assert {s: n for s, n in found.items() if n} == expected
    assert cost.round_trips == 1 and cost.chunks_fetched == len(directory.hashes)
    empty = encode_graph_chunks([])
    assert len(decode_graph_directory(empty[GRAPH_NAME]).hashes) == 0 and len(empty) == 1
    blob = files[GRAPH_NAME]
    for broken in (blob[:6], b"KRGDIR99" + blob[8:], blob[:-1]):
        with pytest.raises(PackageFormatError):
            decode_graph_directory(broken)


def test_unreadable_edges_leave_the_graph_out_and_keep_the_ranking(built: BuildResult) -> None:
    files = dict(built.package.files())

    async def fetch_chunk(name: str) -> bytes:
        return files[name][:-1] + b"?" if ".g-" in name else files[name]

    package = load_package(files["manifest.json"], files.__getitem__, fetch_chunk=fetch_chunk)
    request = QueryRequest(query="como renovar uma permissão de trabalho vencida")
    response = asyncio.run(run_cascade(package, request, None, CascadeServices(), TODAY))
    graph = response.trace["stages"]["graph"]
    assert graph["error"] == "package_integrity" and graph["nodes"] == []
    assert response.results  # the lexical ranking still answers
