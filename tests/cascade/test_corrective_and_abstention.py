"""The corrective expansion and abstention in the cascade: typos repaired (the golden typo
queries among them), strong questions not retried, out-of-scope questions declined."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from router.config import RouterConfig
from router.package.reader import KnowledgePackage
from tests.cascade.common import (
    EXACT_ID,
    HIGH_LEXICAL,
    OUT_OF_SCOPE,
    cascade,
    stage,
)
from tests.common import GOLDEN


def golden_typos() -> list[tuple[str, list[str]]]:
    rows = [json.loads(line) for line in Path(GOLDEN).read_text(encoding="utf-8").splitlines()]
    return [(row["query"], row["expected"]) for row in rows if row["category"] == "typo"]


# Typos that change the stem: repaired through the corpus's surface words (sound key, one edit).
STEM_BREAKING_TYPOS = {"calibrassão de equipamneto", "certifcado de aprovasao do epi"}


def test_typo_is_repaired_and_the_document_is_found(package: KnowledgePackage) -> None:
    response = cascade(package, "permisão de trabalo")
    corrective = stage(response, "corrective")
    assert corrective["corrections"] and corrective["kept"] is True
    assert "workPermit" in [r.doc_id for r in response.results[:3]]
    assert not response.abstained


@pytest.mark.parametrize(
    ("query", "expected"),
    golden_typos(),
)
def test_golden_typo_queries_find_their_document_in_the_top_three(
    package: KnowledgePackage, query: str, expected: list[str]
) -> None:
    response = cascade(package, query)
    assert stage(response, "corrective")["corrections"]
    top = {r.doc_id for r in response.results[:3]} | {r.section_id for r in response.results[:3]}
    assert top & set(expected)


def test_golden_set_still_has_typo_queries() -> None:
    typos = golden_typos()
    assert len(typos) >= 5 and {query for query, _ in typos} >= STEM_BREAKING_TYPOS


def test_typo_that_changes_the_stem_is_still_repaired(package: KnowledgePackage) -> None:
    """'calibrassão' stems to 'calibrassa', 'equipamneto' to 'equipamnet': both far from the
    indexed stems 'calibr'/'equip', but one sounds like and one is a swap of a corpus word."""
    response = cascade(package, "calibrassão de equipamneto")
    corrections = stage(response, "corrective")["corrections"]
    assert corrections == {"calibrassa": "calibr", "equipamnet": "equip"}
    assert "equipment.calibration" in [r.doc_id for r in response.results[:3]]


def test_strong_query_skips_the_corrective_step(package: KnowledgePackage) -> None:
    assert stage(cascade(package, HIGH_LEXICAL), "corrective")["skipped"]
    assert stage(cascade(package, EXACT_ID), "corrective")["skipped"] == "exact hit"
    off = cascade(package, "permisão de trabalo", config=RouterConfig(corrective_expansion=False))
    assert "corrections" not in stage(off, "corrective")


def test_out_of_scope_question_abstains(package: KnowledgePackage) -> None:
    response = cascade(package, OUT_OF_SCOPE)
    assert response.abstained and response.strategy_used == "safe_decline"
    assert response.results == [] and response.citations == [] and response.confidence == 0.0
    assert response.abstention_reason
    assert response.context is not None and response.context.relevant_chunks == []
