"""Stage — graph expansion: depth, decay, node budget and the allowed sections."""

from __future__ import annotations

from router.package.graph_table import RELATIONS, GraphTable
from router.package.reader import KnowledgePackage
from router.stages.graph import RELATION_WEIGHTS, LayeredGraph, expand


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
    [layer] = [part.partition.graph for part in view.parts]
    graph = LayeredGraph([layer])
    seed = max(range(view.num_sections), key=lambda s: len(layer.neighbours(s)))
    assert len(layer.neighbours(seed)) > 3
    found = expand(graph, [(seed, 2.0)], None, depth=2, max_nodes=3)
    assert len(found) == 3 and seed not in [s for s, _, _ in found]
    assert [s for s, _, _ in found] == [s for s, _, _ in sorted(found, key=lambda f: -f[1])]
