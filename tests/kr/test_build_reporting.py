"""What ``kr build`` says about a folder with problems: every error with its ``file:line``, a
duplicate id skipped with both files named (never the whole build refused), and tenants that a
credential can name — at the build and at ``kr keys create``."""

from __future__ import annotations

from pathlib import Path

import pytest

from kr.cli import main
from router.compile.build import build_knowledge
from router.errors import KnowledgeFormatError
from router.knowledge.tenants import is_tenant_id
from tests.common import ALFA, BETA, KNOWLEDGE, SHARED_DATA, write_doc

OK = "---\nsemanticId: ok\ntitle: Ok\n---\nTexto.\n"


def kr_build(kb: Path, state: Path, *extra: str) -> int:
    return main(["build", str(kb), "--state", str(state), "--embedder", "none", *extra])


def bad_files(kb: Path, count: int) -> list[str]:
    """``count`` malformed files, and the ``file:line: message`` ``kr build`` must say of each."""
    said = []
    for number in range(count):
        text = f"---\nsemanticId: bad{number}\ntitle: B\ntrust: nope{number}\n---\nTexto.\n"
        write_doc(kb, f"bad{number:02d}.md", text)
        said.append(f"bad{number:02d}.md:4: unknown trust 'nope{number}'")
    return said


@pytest.mark.parametrize("count", [12, 25])
def test_strict_prints_every_error_with_its_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], count: int
) -> None:
    kb, state = tmp_path / "kb", tmp_path / "state"
    write_doc(kb, "ok.md", OK)
    assert kr_build(kb, state) == 0  # a full build: the next one is a delta
    capsys.readouterr()
    expected = bad_files(kb, count)
    for extra in ([], ["--full"]):  # the delta's check, then the full build's
        assert kr_build(kb, state, "--strict", *extra) == 2
        err = capsys.readouterr().err
        assert f"{count} error(s)" in err
        lines = err.splitlines()
        for said in expected:  # each on a line of its own
            assert sum(line.strip().startswith(said) for line in lines) == 1, (said, err)


def test_a_folder_whose_every_file_is_skipped_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kb = tmp_path / "kb"
    expected = bad_files(kb, 3)
    assert kr_build(kb, tmp_path / "state") == 2  # not "no documents to index" alone
    err = capsys.readouterr().err
    assert "3 error(s)" in err and all(said in err for said in expected)


def _rule(semantic_id: str, start: str, end: str | None, tenant: str = "*") -> str:
    until = f"validUntil: {end}\n" if end else ""
    return (
        f'---\nsemanticId: {semantic_id}\ntitle: Regra\ntenant: "{tenant}"\n'
        f"validFrom: {start}\n{until}---\nTexto.\n"
    )


def test_a_duplicate_id_skips_the_later_file_naming_both_and_strict_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kb, state = tmp_path / "kb", tmp_path / "state"
    write_doc(kb, "a/rule.md", _rule("rule.review", "2024-01-01", None))
    write_doc(kb, "b/copy.md", _rule("Rule.Review", "2025-01-01", "2025-12-31"))
    write_doc(kb, "ok.md", OK)
    assert kr_build(kb, state) == 0
    out, err = capsys.readouterr()
    assert "b/copy.md:2: semanticId 'Rule.Review' is also defined in a/rule.md" in err
    assert "b/copy.md is skipped" in err
    assert "(2 documents" in out
    assert kr_build(kb, state, "--strict") == 2
    assert "b/copy.md:2: semanticId 'Rule.Review' is also defined in a/rule.md" in (
        capsys.readouterr().err
    )


def test_versions_with_separate_windows_and_other_tenants_are_not_duplicates(
    tmp_path: Path,
) -> None:
    write_doc(tmp_path, "v1.md", _rule("rule", "2024-01-01", "2024-12-31"))
    write_doc(tmp_path, "v2.md", _rule("rule", "2025-01-01", "2025-12-31"))
    write_doc(tmp_path, "v3.md", _rule("rule", "2026-01-01", None))
    write_doc(tmp_path, "alfa.md", _rule("rule", "2024-01-01", None, tenant=ALFA))
    write_doc(tmp_path, "beta.md", _rule("rule", "2024-01-01", None, tenant=BETA))
    write_doc(tmp_path, "v4.md", _rule("rule", "2026-06-01", None))  # overlaps v3 only
    result = build_knowledge(tmp_path)
    assert sorted(doc.path for doc in result.corpus.documents) == [
        "alfa.md", "beta.md", "v1.md", "v2.md", "v3.md"
    ]  # fmt: skip
    [error] = result.corpus.errors
    assert error.path == "v4.md" and "also defined in v3.md" in error.message


def test_a_section_id_of_another_document_skips_the_later_file(tmp_path: Path) -> None:
    write_doc(tmp_path, "a.md", "---\nsemanticId: a\ntitle: A\n---\n## X {#shared.part}\nA.\n")
    write_doc(tmp_path, "b.md", "---\nsemanticId: b\ntitle: B\n---\nB.\n\n## Y {#shared.part}\n")
    result = build_knowledge(tmp_path)
    assert [doc.path for doc in result.corpus.documents] == ["a.md"]
    assert [str(d) for d in result.corpus.errors] == [
        "error: b.md:7: section id 'shared.part' is also used in a.md; b.md is skipped"
    ]
    with pytest.raises(KnowledgeFormatError, match=r"also used in a\.md"):
        build_knowledge(tmp_path, strict=True)


# -- tenants ----------------------------------------------------------------------------------


def _tenants_in(folder: Path) -> set[str]:
    found = set()
    for path in folder.rglob("*.md"):
        for line in path.read_text("utf-8").splitlines():
            if line.startswith("tenant:"):
                found.add(line.split(":", 1)[1].strip().strip("\"'"))
    return found - {"*"}


def test_every_tenant_in_use_is_a_tenant_id() -> None:
    tenants = _tenants_in(KNOWLEDGE) | _tenants_in(SHARED_DATA / "helpdesk-pt" / "knowledge")
    assert {ALFA, BETA} <= tenants
    assert all(is_tenant_id(tenant) for tenant in tenants), tenants


@pytest.mark.parametrize(
    "tenant",
    ["a b/../c", "a/../c", "Acme", "acme.corp", "-acme", "a" * 64, "'acme\\n'", "'*acme'", "é"],
)
def test_a_tenant_no_credential_can_name_is_a_build_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tenant: str
) -> None:
    kb, state = tmp_path / "kb", tmp_path / "state"
    write_doc(kb, "ok.md", OK)
    write_doc(kb, "t/doc.md", f"---\nsemanticId: t.doc\ntitle: T\ntenant: {tenant}\n---\nx\n")
    assert kr_build(kb, state) == 0
    out, err = capsys.readouterr()
    assert "t/doc.md:4: invalid tenant" in err and "(1 documents" in out
    assert kr_build(kb, state, "--strict") == 2
    assert "t/doc.md:4: invalid tenant" in capsys.readouterr().err


@pytest.mark.parametrize("tenant", ["a/../c", "Acme", "acme.corp", "acme\n", "a" * 64, "*"])
def test_kr_keys_create_refuses_what_the_build_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tenant: str
) -> None:
    state = ["--state", str(tmp_path / "st")]
    assert main(["keys", "create", "--tenant", tenant, *state]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "not a valid tenant id" in err and "lowercase" in err
    assert main(["keys", "create", "--tenant", "loja-oficial", *state]) == 0
    assert capsys.readouterr().out.startswith("kr_")
