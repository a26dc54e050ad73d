"""Stage — reading the query's terms: their entries in every partition in view, read once per
query and handed to the pipeline as ``IndexReads``; a store that fails degrades the query to
"unknown" terms and names the error, never fails it."""

from __future__ import annotations

import asyncio

from router.compile.build import BuildResult
from router.package.reader import KnowledgePackage, load_package
from router.package.stores.cost import ReadCost
from router.stages.lexical import lexical_search
from router.stages.terms import read_terms
from router.sync import run_sync
from tests.common import ALFA, BETA, failing_chunks
from tests.stages.state import keep, query_state


def test_the_entries_of_known_and_unknown_terms_are_returned_for_the_pipeline(
    built: BuildResult,
) -> None:
    files = built.package.files()
    cold = load_package(files["manifest.json"], files.__getitem__)  # its chunks not read yet
    state = query_state(cold, "validade da APR", read=False)
    reads, cost = run_sync(read_terms(state, ["validad", "apr", "cenour"]))
    assert set(reads.terms) == {"validad", "apr", "cenour"}
    assert reads.terms["cenour"] == (None,)  # read, and no partition holds it
    apr = reads.terms["apr"][0]
    assert apr is not None and apr.df > 0
    assert cost.round_trips == 1 and cost.chunks_fetched >= 1
    assert reads.exact is None and reads.records is None and not reads.texts  # terms only
    assert "apr" not in state.package.term_found  # the stage writes nothing on the state
    keep(state, reads)
    assert state.package.knows("apr") and not state.package.knows("cenour")
    assert state.package.document_frequency("apr") == apr.df


def test_terms_already_read_for_the_query_are_not_read_again(package: KnowledgePackage) -> None:
    state = query_state(package, "validade da APR")  # the first reads kept them
    assert {"validad", "apr"} <= set(state.package.term_found)
    reads, cost = run_sync(read_terms(state, state.features.terms))
    assert reads.terms == {} and cost == ReadCost(0, 0, 0, 0)


def test_a_tenant_view_reads_its_own_partition_too(package: KnowledgePackage) -> None:
    """ "forno" is written only in Metalúrgica Beta's documents: known to Beta, to no one else."""
    [stem] = package.view(None).analyzer.terms("forno")
    known = {}
    for tenant in (None, ALFA, BETA):
        state = query_state(package, "bloqueio do forno", tenant=tenant, read=False)
        reads, _ = run_sync(read_terms(state, [stem]))
        assert len(reads.terms[stem]) == len(state.package.parts)  # one entry per partition
        keep(state, reads)
        known[tenant] = state.package.knows(stem)
    assert known == {None: False, ALFA: False, BETA: True}


def test_an_unreadable_vocabulary_makes_the_terms_unknown_and_names_the_error(
    built: BuildResult,
) -> None:
    damaged = failing_chunks(built.package.files(), ".v-")
    state = query_state(damaged, "validade da APR", read=False)
    reads, cost = asyncio.run(read_terms(state, ["validad", "apr"]))  # as the Worker reads
    assert reads.terms == {"validad": (None,), "apr": (None,)}
    assert cost.round_trips == 1 and state.unreadable == ["package_integrity"]
    keep(state, reads)
    lexical = run_sync(lexical_search(state, ["validad", "apr"], cost))
    assert lexical.bm25 == [] and lexical.confidence.unknown_terms == ["validad", "apr"]
    assert state.trace.stages["bm25"]["error"] == "package_integrity"


def test_a_failed_read_never_forgets_the_terms_read_before_it(
    package: KnowledgePackage, built: BuildResult
) -> None:
    healthy = query_state(package, "APR", read=False)
    earlier, _ = run_sync(read_terms(healthy, ["apr"]))
    state = query_state(failing_chunks(built.package.files(), ".v-"), "APR", read=False)
    keep(state, earlier)
    reads, _ = asyncio.run(read_terms(state, ["apr", "validad"]))
    assert set(reads.terms) == {"validad"}  # "apr" is not overwritten as unknown
    keep(state, reads)
    assert state.package.knows("apr") and not state.package.knows("validad")
