"""The input contract: clear file:line errors, sections, links, facts, versions, encodings."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from router.compile.build import build_knowledge
from router.compile.corpus import load_knowledge
from router.errors import KnowledgeFormatError
from router.knowledge.parser import parse_document
from tests.common import write_doc

GOOD = """---
semanticId: workPermit.components
title: Componentes da Permissão de Trabalho
keywords: [componentes, PT]
aliases: [componentes da PT]
facts:
  maxValidityDays: 7
  approver: Supervisor de área
---
# Componentes da Permissão de Trabalho

Introdução com [[workPermit]] e [[equipment.validity|validade do equipamento]].

## Validade dos equipamentos {#workPermit.components.equipment.validity}

Os equipamentos vencem.

## Outra seção

Texto.
"""


def test_sections_ids_links_and_facts_are_parsed() -> None:
    doc = parse_document("wp.md", GOOD)
    assert doc.semantic_id == "workPermit.components"
    assert [s.section_id for s in doc.sections] == [
        "workPermit.components#componentes-da-permissao-de-trabalho",
        "workPermit.components.equipment.validity",
        "workPermit.components#outra-secao",
    ]
    assert [link.target for link in doc.sections[0].links] == ["workPermit", "equipment.validity"]
    assert doc.facts == {"maxValidityDays": 7, "approver": "Supervisor de área"}
    assert doc.aliases == ["componentes da PT"]


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("# no front matter\n", 1, "missing front matter"),
        ("---\ntitle: T\n---\nbody\n", 1, "semanticId"),
        ("---\nsemanticId: 9bad..id\ntitle: T\n---\n", 2, "malformed semanticId"),
        ("---\nsemanticId: a\ntitle: T\nkeywords: [a, b\n---\n", 4, "invalid YAML"),
        ("---\nsemanticId: a\ntitle: T\ntrust: super\n---\n", 4, "unknown trust"),
        ("---\nsemanticId: a\ntitle: T\nfacts:\n  x: [1, 2]\n---\n", 5, "must be a scalar"),
        ("---\nsemanticId: a\ntitle: T\n", 1, "not closed"),
        ("---\nsemanticId: a\ntitle: T\n---\n## Bad {#1bad}\n", 5, "malformed section id"),
    ],
)
def test_malformed_files_name_file_and_line(text: str, line: int, fragment: str) -> None:
    with pytest.raises(KnowledgeFormatError) as info:
        parse_document("docs/bad.md", text)
    assert info.value.path == "docs/bad.md"
    assert info.value.line == line
    assert fragment in info.value.message
    assert info.value.message.startswith(f"docs/bad.md:{line}:")


def test_invalid_utf8_names_the_line() -> None:
    with pytest.raises(KnowledgeFormatError) as info:
        parse_document("x.md", b"---\nsemanticId: a\ntitle: T\n---\nok\n\xff\xfe bad\n")
    assert info.value.line == 6


def test_bad_file_is_skipped_unless_strict(tmp_path: Path) -> None:
    write_doc(tmp_path, "good.md", GOOD)
    write_doc(tmp_path, "sub/bad.md", "---\ntitle: no id\n---\ntext\n")
    write_doc(tmp_path, "_synonyms.yml", "- [PT, permissão de trabalho]\n")
    write_doc(tmp_path, "_draft_notes.md", "not a document")
    result = build_knowledge(tmp_path)
    assert result.package.manifest.counts["documents"] == 1
    assert [str(d) for d in result.corpus.errors] == [
        "error: sub/bad.md:1: missing required key 'semanticId'"
    ]
    assert result.corpus.synonyms == [["PT", "permissão de trabalho"]]
    with pytest.raises(KnowledgeFormatError, match=r"sub/bad\.md:1"):
        build_knowledge(tmp_path, strict=True)


def _rule(version: int, start: str, end: str | None) -> str:
    until = f"validUntil: {end}\n" if end else ""
    return (
        f"---\nsemanticId: rule.review\ntitle: Regra\nversion: {version}\n"
        f"validFrom: {start}\n{until}---\nRevisar a cada {version} meses.\n"
    )


def test_successive_versions_are_allowed_an_overlapping_one_is_skipped(tmp_path: Path) -> None:
    write_doc(tmp_path, "v1.md", _rule(1, "2024-01-01", "2025-12-31"))
    write_doc(tmp_path, "v2.md", _rule(2, "2026-01-01", None))
    assert build_knowledge(tmp_path).package.manifest.counts["documents"] == 2
    write_doc(tmp_path, "v3.md", _rule(3, "2025-06-01", None))
    result = build_knowledge(tmp_path)  # not strict: v3 is skipped, v1 and v2 are built
    assert [doc.path for doc in result.corpus.documents] == ["v1.md", "v2.md"]
    assert result.package.manifest.counts["documents"] == 2
    [error] = result.corpus.errors
    assert (error.path, error.line) == ("v3.md", 2)
    assert "also defined in v1.md" in error.message and "v3.md is skipped" in error.message
    with pytest.raises(KnowledgeFormatError) as info:
        build_knowledge(tmp_path, strict=True)
    assert "v1.md" in info.value.message and "v3.md" in info.value.message


def test_unknown_wikilink_is_a_warning(tmp_path: Path) -> None:
    write_doc(tmp_path, "a.md", "---\nsemanticId: a\ntitle: A\n---\nVeja [[nowhere.id]].\n")
    corpus = load_knowledge(tmp_path)
    assert not corpus.errors
    assert any("nowhere.id" in d.message and d.level == "warning" for d in corpus.diagnostics)


def test_bom_crlf_and_nfd_give_the_same_package(tmp_path: Path) -> None:
    plain, variant = tmp_path / "plain", tmp_path / "variant"
    write_doc(plain, "wp.md", GOOD)
    odd = "\ufeff" + unicodedata.normalize("NFD", GOOD).replace("\n", "\r\n")
    (variant / "wp.md").parent.mkdir(parents=True)
    (variant / "wp.md").write_bytes(odd.encode("utf-8"))
    first, second = build_knowledge(plain).package, build_knowledge(variant).package
    assert first.files() == second.files()
