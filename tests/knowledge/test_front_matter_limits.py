"""Front matter is bounded: no YAML aliases (a 1 KB file could describe gigabytes), and a size
limit on the front matter, its nesting and number of values, and each field — each refused as a
format error at its line (docs/knowledge-format.md, "Limits")."""

from __future__ import annotations

from pathlib import Path

import pytest

from router.compile.build import build_knowledge
from router.compile.corpus import load_knowledge
from router.errors import KnowledgeFormatError
from router.knowledge import parser
from router.knowledge.front_matter import MAX_DEPTH, MAX_FRONT_MATTER_CHARS, MAX_NODES
from router.knowledge.parser import parse_document
from tests.common import KNOWLEDGE, SHARED_DATA, write_doc


def bomb(levels: int) -> str:
    """``levels`` nested ``&a [*a ×10]`` under an unknown key: 10^levels values once expanded."""
    lines = ["---", "semanticId: bomb", "title: Bomba", "extra:", "  l0: &a0 [x, x, x, x, x]"]
    for level in range(1, levels + 1):
        refs = ", ".join([f"*a{level - 1}"] * 10)
        lines.append(f"  l{level}: &a{level} [{refs}]")
    return "\n".join([*lines, "---", "Texto.", ""])


def test_an_alias_bomb_is_refused_at_the_alias_line_and_skipped(tmp_path: Path) -> None:
    write_doc(tmp_path, "ok.md", "---\nsemanticId: ok\ntitle: Ok\n---\nTexto.\n")
    write_doc(tmp_path, "bomb.md", bomb(6))
    result = build_knowledge(tmp_path)
    assert [str(d) for d in result.corpus.errors] == [
        "error: bomb.md:6: invalid YAML front matter in 'extra': aliases (*name) are not "
        "allowed: write each value out"
    ]
    assert result.package.manifest.counts["documents"] == 1
    assert sum(len(blob) for blob in result.package.files().values()) < 100_000


def test_a_nine_level_bomb_costs_no_more_than_its_size() -> None:
    with pytest.raises(KnowledgeFormatError, match="aliases"):
        parse_document("bomb.md", bomb(9))


@pytest.mark.parametrize(
    ("front", "line"),
    [
        ("base: &b 7\nother: *b", 5),
        ("base: &b {x: 1}\nmerged:\n  <<: *b\n  y: 2", 6),
        ("facts:\n  a: &v 1\n  b: *v", 6),
        ("keywords: &k [a, b]\naliases: *k", 5),
        ("keywords:\n  - &k PT\n  - *k", 6),
    ],
)
def test_every_alias_is_refused_at_its_own_line(front: str, line: int) -> None:
    with pytest.raises(KnowledgeFormatError) as info:
        parse_document("x.md", f"---\nsemanticId: a\ntitle: T\n{front}\n---\nbody\n")
    assert info.value.line == line
    assert "aliases (*name) are not allowed" in info.value.detail


def test_an_alias_bomb_in_the_synonyms_file_is_refused_too(tmp_path: Path) -> None:
    write_doc(tmp_path, "ok.md", "---\nsemanticId: ok\ntitle: Ok\n---\nTexto.\n")
    groups = ["- &g0 [PT, permissão de trabalho]"]
    groups += [f"- &g{n} [{', '.join([f'*g{n - 1}'] * 10)}]" for n in range(1, 7)]
    write_doc(tmp_path, "_synonyms.yml", "\n".join(groups) + "\n")
    corpus = load_knowledge(tmp_path)
    [error] = corpus.errors
    assert (error.path, error.line) == ("_synonyms.yml", 2) and "aliases" in error.message
    assert corpus.synonyms == []


def test_an_anchor_without_an_alias_is_harmless() -> None:
    doc = parse_document("x.md", "---\nsemanticId: a\ntitle: &t T\nkeywords: &k [a]\n---\nb\n")
    assert (doc.title, doc.keywords) == ("T", ["a"])


@pytest.mark.parametrize(
    ("front", "fragment"),
    [
        ("extra: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "nested deeper than 16"),
        ("extra: " + "[" * 900 + "]" * 900, "nested deeper than 16"),
        (
            "extra:\n" + "".join(f"{'  ' * n}k{n}:\n" for n in range(1, MAX_DEPTH + 2)),
            "nested deeper than 16",
        ),
        ("extra: [" + ", ".join(["1"] * MAX_NODES) + "]", f"more than {MAX_NODES} values"),
        ("extra: '" + "x" * MAX_FRONT_MATTER_CHARS + "'", "front matter is longer than 65536"),
    ],
)
def test_the_front_matter_as_a_whole_is_bounded(front: str, fragment: str) -> None:
    with pytest.raises(KnowledgeFormatError) as info:
        parse_document("x.md", f"---\nsemanticId: a\ntitle: T\n{front}\n---\nbody\n")
    assert fragment in info.value.detail


def _items(count: int, size: int = 3) -> str:
    return "[" + ", ".join(f"i{n:0{size - 1}d}" for n in range(count)) + "]"


LIMITS = [
    ("semanticId", lambda n: "a" * n, parser.MAX_ID_CHARS, "malformed semanticId"),
    ("title", lambda n: "t" * n, parser.MAX_TITLE_CHARS, "title is longer than 300"),
    ("description", lambda n: "d" * n, parser.MAX_DESCRIPTION_CHARS, "description is longer"),
    ("keywords", _items, parser.MAX_LIST_ITEMS, "keywords has more than 100 items"),
    ("keywords", lambda n: f"[{'k' * n}]", parser.MAX_ITEM_CHARS, "an item of keywords is"),
    ("aliases", _items, parser.MAX_LIST_ITEMS, "aliases has more than 100 items"),
    ("aliases", lambda n: "a" * n, parser.MAX_ITEM_CHARS, "an item of aliases is longer"),
    ("questions", _items, parser.MAX_LIST_ITEMS, "questions has more than 100 items"),
    ("questions", lambda n: "q" * n, parser.MAX_ITEM_CHARS, "longer than 300 characters"),
    ("version", lambda n: "v" * n, parser.MAX_SHORT_CHARS, "version is longer than 200"),
    ("module", lambda n: "m" * n, parser.MAX_SHORT_CHARS, "module is longer than 200"),
    ("page", lambda n: "p" * n, parser.MAX_SHORT_CHARS, "page is longer than 200"),
    (
        "facts",
        lambda n: "{" + ", ".join(f"f{i}: {i}" for i in range(n)) + "}",
        parser.MAX_FACTS,
        "facts has more than 200 facts",
    ),
    ("facts", lambda n: "{note: " + "n" * n + "}", parser.MAX_FACT_CHARS, "fact 'note' is longer"),
    ("extra", lambda n: "e" * (n - 13), parser.MAX_METADATA_CHARS, "the keys the format does not"),
]


@pytest.mark.parametrize(("key", "value", "limit", "fragment"), LIMITS)
def test_each_field_has_a_size_limit_named_at_its_line(
    key: str, value: object, limit: int, fragment: str
) -> None:
    def text(size: int) -> str:
        rendered = value(size)  # type: ignore[operator]
        fields = {"semanticId": "a", "title": "T", key: rendered}
        lines = "\n".join(f"{k}: {v}" for k, v in fields.items())
        return f"---\n{lines}\n---\nbody\n"

    parse_document("x.md", text(limit))  # at the limit: fine
    with pytest.raises(KnowledgeFormatError) as info:
        parse_document("x.md", text(limit + 1))
    assert fragment in info.value.detail
    assert info.value.line == (2 if key == "semanticId" else 3 if key == "title" else 4)


def test_the_sample_knowledge_is_within_every_limit() -> None:
    for folder in (KNOWLEDGE, SHARED_DATA / "helpdesk-pt" / "knowledge"):
        if folder.is_dir():
            assert not load_knowledge(folder).errors
