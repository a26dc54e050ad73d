"""Stage — the corrective expansion: one retry of a weak lexical result (typos repaired, then
synonyms), the more confident try kept, and the term entries it read handed back, never
written into the query's state."""

from __future__ import annotations

import asyncio

from router.compile.build import BuildResult
from router.config import RouterConfig
from router.package.reader import KnowledgePackage
from router.results import Lexical
from router.stages.corrective import correct, is_weak
from router.state import QueryState
from router.sync import run_sync
from tests.common import failing_chunks
from tests.stages.state import keep, searched_state

# Every threshold above the sample's best answers: any question is weak enough to retry.
EVERYTHING_WEAK = RouterConfig(high_confidence=0.95, medium_confidence=0.9)


def top_document(state: QueryState, lexical: Lexical) -> str:
    view = state.package
    doc = view.section_doc[lexical.bm25[0][0]]
    records, _ = run_sync(view.load_records([doc]))
    return records[doc].semantic_id


def test_a_typo_is_repaired_and_the_repaired_search_kept(package: KnowledgePackage) -> None:
    state = searched_state(package, "calibração de equipamneto")
    weak = state.lexical_result()
    assert weak.confidence.unknown_terms == ["equipamnet"]
    assert is_weak(weak.confidence, state.config)
    best, _ = run_sync(correct(state, weak))
    assert best.terms == ["calibr", "equip"]
    assert best.confidence.value > weak.confidence.value and best.confidence.unknown_terms == []
    assert top_document(state, best) == "equipment.calibration"
    traced = state.trace.stages["corrective"]
    assert traced["corrections"] == {"equipamnet": "equip"} and traced["kept"] is True
    assert traced["before"] < traced["after"] == round(best.confidence.value, 3)
    assert "bm25_corrected" in state.trace.stages  # the retry is traced apart


def test_the_entries_it_read_are_returned_not_written_to_the_state(
    package: KnowledgePackage,
) -> None:
    state = searched_state(package, "calibrassão de equipamneto")
    view, lexical = state.package, state.lexical
    best, reads = run_sync(correct(state, state.lexical_result()))
    assert state.package is view and state.lexical is lexical  # the pipeline keeps the result
    assert {"calibr", "equip"} <= set(reads.terms)
    assert "equip" not in view.term_found  # read by the stage, on its own copy of the state
    keep(state, reads)
    assert state.package.knows("equip") and state.package.knows("calibr")
    assert top_document(state, best) == "equipment.calibration"


def test_a_retry_no_more_confident_is_dropped(package: KnowledgePackage) -> None:
    """ "EPI" is weak under these thresholds; its synonym group is searched, scores no better,
    and the question's own result is served."""
    state = searched_state(package, "EPI", config=EVERYTHING_WEAK)
    weak = state.lexical_result()
    assert is_weak(weak.confidence, state.config) and weak.confidence.unknown_terms == []
    best, reads = run_sync(correct(state, weak))
    assert best is weak
    assert "bm25_expanded" in state.trace.stages  # the synonyms were tried
    assert {"equip", "individual", "proteca"} <= set(reads.terms)
    traced = state.trace.stages["corrective"]
    assert traced["kept"] is False and traced["synonyms"] == [] and traced["corrections"] == {}
    assert traced["before"] == traced["after"]


def test_nothing_to_repair_or_expand_returns_the_result_as_it_was(
    package: KnowledgePackage,
) -> None:
    state = searched_state(package, "receita de bolo de cenoura")
    weak = state.lexical_result()
    best, _ = run_sync(correct(state, weak))
    assert best is weak and best.bm25 == []
    assert state.trace.stages["corrective"] == {"ms": 0.0, "changed": False}


def test_a_repaired_word_can_still_leave_another_unknown(package: KnowledgePackage) -> None:
    state = searched_state(package, "permisão xyzzq")
    best, _ = run_sync(correct(state, state.lexical_result()))
    assert best.terms == ["permissa", "xyzzq"]
    assert best.confidence.unknown_terms == ["xyzzq"] and best.bm25  # half the question found


def test_weak_means_low_confidence_low_coverage_or_an_unknown_word(
    package: KnowledgePackage,
) -> None:
    config = RouterConfig()
    strong = searched_state(package, "inventário de riscos").lexical_result().confidence
    assert not is_weak(strong, config)
    assert is_weak(strong, RouterConfig(high_confidence=0.99, medium_confidence=0.95))
    assert is_weak(strong, RouterConfig(min_coverage=1.0)) is False  # coverage is 1.0
    half = searched_state(package, "treinamento de emergência").lexical_result().confidence
    assert half.coverage == 0.5 and half.value >= config.medium_confidence
    assert not is_weak(half, config) and is_weak(half, RouterConfig(min_coverage=0.6))
    typo = searched_state(package, "inventário de riscus").lexical_result().confidence
    assert typo.unknown_terms and is_weak(typo, config)


def test_unreadable_typo_words_leave_the_stem_repair_and_name_the_error(
    built: BuildResult,
) -> None:
    """ "certifcado" is repaired at the stem level; "aprovasao" needs the corpus's words, whose
    chunks cannot be read: the retry still runs on what could be repaired."""
    damaged = failing_chunks(built.package.files(), ".w-")
    state = searched_state(damaged, "certifcado de aprovasao do epi")
    weak = state.lexical_result()
    best, _ = asyncio.run(correct(state, weak))  # as the Worker reads
    assert best.terms == ["certific", "aprovasa", "epi"]
    assert best.confidence.value > weak.confidence.value
    assert state.unreadable == ["package_integrity"]
    assert state.trace.stages["corrective"]["corrections"] == {"certifc": "certific"}
