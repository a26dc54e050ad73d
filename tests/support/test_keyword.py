"""The keyword stage: curated phrases point at their targets; a phrase all documents share, none."""

from __future__ import annotations

from pathlib import Path

from router.compile.build import build_knowledge
from router.contract import QueryRequest
from router.package.format.keywords import MAX_PHRASE_TARGETS
from router.package.reader import load_package
from router.pipeline import run_query
from tests.common import TODAY, write_doc


def _knowledge(folder: Path, sharing: int) -> None:
    """``sharing`` documents with the same heading "Registro de inspeção", and one with the
    keyword "cinto paraquedista"."""
    for number in range(sharing):
        write_doc(
            folder,
            f"doc{number}.md",
            f"---\nsemanticId: inspecao.area{number}\ntitle: Área {number}\n---\n"
            f"# Área {number}\n\nTexto da área {number}.\n\n"
            f"## Registro de inspeção\n\nAnote a inspeção da área {number}"
            + " com atenção" * (number % 7)
            + ".\n",
        )
    write_doc(
        folder,
        "cinto.md",
        "---\nsemanticId: epi.cinto\ntitle: Cinto\nkeywords: [cinto paraquedista]\n---\n"
        "# Cinto\n\nO cinto paraquedista protege contra quedas.\n",
    )


def _keyword_matches(folder: Path, query: str) -> tuple[list[list[object]], list[str]]:
    files = build_knowledge(folder).package.files()
    package = load_package(files["manifest.json"], files.__getitem__)
    response = run_query(package, QueryRequest(query=query), today=TODAY)
    stages = response.trace["stages"]
    return stages["keyword"]["matches"], [r.doc_id for r in response.results]


def test_a_phrase_shared_by_too_many_sections_is_left_to_bm25(tmp_path: Path) -> None:
    _knowledge(tmp_path, MAX_PHRASE_TARGETS + 1)
    matches, docs = _keyword_matches(tmp_path, "registro de inspeção")
    assert matches == []  # 65 ties would have been cut by section number
    assert docs and all(doc.startswith("inspecao.area") for doc in docs)  # BM25 still ranks
    matches, docs = _keyword_matches(tmp_path, "cinto paraquedista")
    assert [str(ref) for ref, _ in matches] == ["epi.cinto#cinto"]
    assert docs[0] == "epi.cinto"


def test_a_phrase_shared_within_the_limit_still_matches(tmp_path: Path) -> None:
    _knowledge(tmp_path, MAX_PHRASE_TARGETS)
    matches, _ = _keyword_matches(tmp_path, "registro de inspeção")
    assert len(matches) > 0
