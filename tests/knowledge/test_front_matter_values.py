"""Front-matter values the parser converts: an impossible date, a bad tag or an odd YAML type
in any field is a format error naming the file, the line and the field — never a traceback —
and the build skips that file (or refuses the folder with ``--strict``), ``--watch`` included."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import pickle
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kr.cli import _parser, main
from kr.commands.build import _build_reporting
from router.compile.build import build_knowledge
from router.compile.corpus import load_knowledge
from router.errors import KnowledgeFormatError
from router.knowledge.model import ALL_TENANTS
from router.knowledge.parser import parse_document
from router.knowledge.tenants import is_tenant_id
from tests.common import write_doc

OK = "---\nsemanticId: ok\ntitle: Ok\n---\nTexto.\n"


def _doc(extra: str) -> str:
    return f"---\nsemanticId: rule\ntitle: Regra\n{extra}\n---\nTexto da regra.\n"


@pytest.mark.parametrize("key", ["createdAt", "updatedAt", "validFrom", "validUntil"])
@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("2024-02-30", "day is out of range for month"),
        ("2023-02-29", "day is out of range for month"),
        ("2024-13-01", "month must be in 1..12"),
        ("2024-01-01T25:00:00", "hour must be in 0..23"),
        ("!!timestamp amanhã", "not a date or time"),
        ('"2024-02-30"', "day is out of range for month"),
        ("ontem", "Invalid isoformat"),
        ("[2024-01-01]", ""),
    ],
)
def test_an_impossible_date_in_any_date_field_names_file_line_and_field(
    key: str, value: str, why: str
) -> None:
    with pytest.raises(KnowledgeFormatError) as info:
        parse_document("docs/rule.md", _doc(f"version: 2\n{key}: {value}"))
    assert (info.value.path, info.value.line) == ("docs/rule.md", 5)
    assert info.value.detail.startswith(f"{key} is not a date")
    assert why in info.value.detail


def test_an_impossible_date_as_a_fact_names_the_facts_line() -> None:
    text = _doc("facts:\n  maxDays: 7\n  deadline: 2024-02-30")
    with pytest.raises(KnowledgeFormatError) as info:
        parse_document("rule.md", text)
    assert info.value.line == 6
    assert "fact 'deadline' is not a date" in info.value.detail


@pytest.mark.parametrize(
    ("extra", "line", "fragment"),
    [
        ("count: !!int abc", 4, "in 'count': cannot read 'abc' as int"),
        ("flag: !!bool talvez", 4, "in 'flag': cannot read 'talvez' as bool"),
        ("big: " + "9" * 5000, 4, "in 'big': cannot read"),
        ("facts:\n  ratio: !!float x", 5, "in 'facts': cannot read 'x' as float"),
        ("facts:\n  ratio: .nan", 5, "fact 'ratio' must be a finite number"),
        ("title: 2024", 3, "title must be text, not a number"),
    ],
)
def test_a_value_yaml_cannot_convert_is_a_format_error(
    extra: str, line: int, fragment: str
) -> None:
    text = extra if extra.startswith("title:") else f"title: T\n{extra}"
    with pytest.raises(KnowledgeFormatError) as info:
        parse_document("x.md", f"---\nsemanticId: a\n{text}\n---\nbody\n")
    assert info.value.line == line
    assert fragment in info.value.detail


def test_an_unknown_key_keeps_odd_values_as_plain_json() -> None:
    doc = parse_document(
        "x.md",
        _doc("note: 2024-02-30\nblob: !!binary aGVsbG8=\ntags: !!set {b, a}\nratio: .inf"),
    )
    assert doc.metadata == {
        "note": "2024-02-30",
        "blob": "aGVsbG8=",
        "tags": ["a", "b"],
        "ratio": "inf",
    }
    assert type(doc.metadata["note"]) is str
    assert pickle.loads(pickle.dumps(doc)) == doc  # the document cache pickles it


def test_the_build_skips_the_file_and_strict_refuses_it(tmp_path: Path) -> None:
    write_doc(tmp_path, "ok.md", OK)
    write_doc(tmp_path, "sub/bad.md", _doc("createdAt: 2024-02-30"))
    corpus = load_knowledge(tmp_path)
    assert [doc.path for doc in corpus.documents] == ["ok.md"]
    assert [str(d) for d in corpus.errors] == [
        "error: sub/bad.md:4: createdAt is not a date: '2024-02-30' (day is out of range for month)"
    ]
    with pytest.raises(KnowledgeFormatError, match=r"sub/bad\.md:4: createdAt is not a date"):
        build_knowledge(tmp_path, strict=True)


def test_kr_build_reports_the_file_in_every_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kb = tmp_path / "kb"
    write_doc(kb, "ok.md", OK)
    write_doc(kb, "bad.md", _doc("validUntil: 2025-04-31"))
    state = ["--state", str(tmp_path / "state"), "--embedder", "none"]
    said = "bad.md:4: validUntil is not a date: '2025-04-31' (day is out of range for month)"
    assert main(["build", str(kb), *state]) == 0  # full
    assert said in capsys.readouterr().err
    write_doc(kb, "ok.md", OK + "Mais.\n")
    assert main(["build", str(kb), *state]) == 0  # delta
    assert said in capsys.readouterr().err
    assert main(["build", str(kb), *state, "--strict"]) == 2
    assert said in capsys.readouterr().err
    assert main(["build", str(kb), *state, "--strict", "--full"]) == 2
    assert said in capsys.readouterr().err


def test_watch_reports_an_impossible_date_and_keeps_watching(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kb = tmp_path / "kb"
    write_doc(kb, "ok.md", OK)
    write_doc(kb, "bad.md", _doc("createdAt: 2024-02-30"))
    argv = ["build", str(kb), "--watch", "--strict", "--embedder", "none"]
    args = _parser().parse_args([*argv, "--state", str(tmp_path / "state")])
    asyncio.run(_build_reporting(args))  # one rebuild of the watch loop: it must return
    said = capsys.readouterr().out
    assert "build failed" in said and "bad.md:4: createdAt is not a date" in said


# -- fuzzing: every YAML type in every field ----------------------------------------------------

FIELDS = [
    "semanticId", "title", "description", "keywords", "aliases", "questions", "tenant", "trust",
    "status", "version", "createdAt", "updatedAt", "validFrom", "validUntil", "application",
    "module", "entity", "page", "tab", "facts", "extra",
]  # fmt: skip

RAW = [
    "2024-02-30", "2024-02-29", "2023-02-29", "2024-13-01", "2024-01-01T25:00:00",
    "2024-01-01 10:00:00+25:00", "20240101", "!!int abc", "!!float x", "!!bool talvez",
    "!!timestamp amanhã", "!!binary aGVsbG8=", "!!binary ***", "!!set {a, b}", "!!omap [{a: 1}]",
    "!!pairs [{a: 1}, {a: 2}]", "!!str", "!!null x", "!!map x", "!!seq x", "!custom x",
    "!!python/object:os.system x", "&a [1, 2]", "*a", "[*a, *a]", "{<<: *a}", "<<: x",
    "9" * 5000, ".nan", "-.inf", "0x1F", "0o17", "1_000", "1:20:30", "yes", "~", "'open",
    "[", "{a: [}", "{[a]: 1}", "{? {a: 1} : 2}", "[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]",
    '"\\ud800"', '"\\x00"', "\t", "a b/../c", "Acme", "loja-oficial", "'*'",
    "{maxDays: 7, 9bad: 1}", "{ok: [1]}", "{ok: 2024-02-30}", "{x.y: 1}", "{ok: 1e400}",
    "[a, [b]]", "[a, {b: 1}]", "[1, true, null, 2024-01-01]", "x" * 5000,
]  # fmt: skip

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=20),
    st.dates(),
    st.datetimes(),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


def _flow(value: object) -> str:
    dumped = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=10**6)
    return dumped.removesuffix("\n").removesuffix("\n...").strip()


_rendered = st.one_of(_values.map(_flow), st.sampled_from(RAW))


@st.composite
def front_matters(draw: st.DrawFn) -> str:
    fields: dict[str, str] = {"semanticId": "rule.a", "title": "Regra"}
    for key in draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=4, unique=True)):
        fields[key] = draw(_rendered)
    return "\n".join(f"{key}: {value}" for key, value in fields.items())


@settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(front_matters())
def test_every_yaml_type_in_every_field_parses_or_is_a_format_error(front: str) -> None:
    text = f"---\n{front}\n---\n# Regra\n\nTexto.\n"
    try:
        doc = parse_document("kb/rule.md", text)
    except KnowledgeFormatError as exc:
        assert exc.path == "kb/rule.md"
        assert 1 <= exc.line <= text.count("\n")
        assert exc.message.startswith(f"kb/rule.md:{exc.line}: ")
        return
    for day in (doc.created_at, doc.updated_at, doc.valid_from, doc.valid_until):
        assert day is None or dt.date.fromisoformat(day).isoformat() == day
    assert doc.tenant == ALL_TENANTS or is_tenant_id(doc.tenant)
    assert all(isinstance(v, str | int | float | bool) for v in doc.facts.values())
    json.dumps([doc.metadata, doc.facts], allow_nan=False, sort_keys=True)  # the record is JSON
    assert pickle.loads(pickle.dumps(doc)) == doc
