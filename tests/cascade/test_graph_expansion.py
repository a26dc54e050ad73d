"""The graph expansion in the cascade: its nodes after what the query matched, its node
budget, its scores relative to the best seed."""

from __future__ import annotations

from router.compile.build import BuildResult
from router.config import RetrievalBudget, RouterConfig
from router.package.reader import KnowledgePackage, load_package
from tests.cascade.common import (
    HIGH_LEXICAL,
    LOW_LEXICAL,
    cascade,
    stage,
)
from tests.common import ALFA


def test_graph_nodes_are_appended_after_what_the_query_matched(package: KnowledgePackage) -> None:
    with_graph = cascade(package, LOW_LEXICAL, tenant=ALFA, top_k=50)
    without = cascade(
        package, LOW_LEXICAL, tenant=ALFA, top_k=50, config=RouterConfig(graph_depth=0)
    )
    assert stage(without, "graph")["nodes"] == []
    matched = [r.section_id for r in with_graph.results if "bm25" in r.scores]
    assert matched == [r.section_id for r in without.results if "bm25" in r.scores]
    graph_only = [i for i, r in enumerate(with_graph.results) if set(r.scores) == {"graph"}]
    assert graph_only, "expected at least one section found by the graph alone"
    last_matched = max(i for i, r in enumerate(with_graph.results) if "bm25" in r.scores)
    assert min(graph_only) > last_matched
    nodes = {node for node, _, _ in stage(with_graph, "graph")["nodes"]}
    for result in with_graph.results:
        assert ("graph" in result.scores) == (result.section_id in nodes)


def test_graph_trace_respects_the_node_budget_and_excludes_seeds(
    package: KnowledgePackage,
) -> None:
    config = RouterConfig(budget=RetrievalBudget(max_graph_nodes=2))
    response = cascade(package, HIGH_LEXICAL, config=config, top_k=50)
    graph = stage(response, "graph")
    assert len(graph["nodes"]) == 2
    assert not set(graph["seeds"]) & {node for node, _, _ in graph["nodes"]}
    assert len(graph["seeds"]) == RouterConfig().graph_seeds


def test_graph_scores_are_relative_to_the_best_seed(package: KnowledgePackage) -> None:
    response = cascade(package, "validade da permissão de trabalho", top_k=50)
    assert stage(response, "exact")["hits"]
    nodes = stage(response, "graph")["nodes"]
    assert nodes and all(0.0 < score <= 1.0 for _, score, _ in nodes)


def test_a_cold_query_reads_its_records_beside_the_graph_not_after_it(
    built: BuildResult, package: KnowledgePackage
) -> None:
    """The records of what the lexical stages ranked first come with the graph's edges; after
    fusion only a shown section they did not cover is read, and a neighbour the response does
    not show is named in the trace only when its record is at hand (docs/adr/0030)."""
    files = built.package.files()
    cold = load_package(files["manifest.json"], files.__getitem__)
    response = cascade(cold, LOW_LEXICAL, tenant=ALFA, top_k=2)
    stages = response.trace["stages"]
    assert stages["early_records"]["round_trips"] == 1 and stages["early_records"]["documents"]
    assert stages["records"]["round_trips"] == 0  # the shown sections' records came early
    nodes = [node for node, _, _ in stages["graph"]["nodes"]]
    assert None in nodes  # a neighbour outside the response, whose record was not read
    assert len(nodes) > nodes.count(None)  # those of documents read anyway are named
    warm = cascade(package, LOW_LEXICAL, tenant=ALFA, top_k=2)  # an isolate holding more
    assert warm.results == response.results and warm.answer == response.answer
