"""``kr build`` between full builds (docs/adr/0020): the files changed since the last full build
are compiled as delta partitions, published without the base's files, gated and served; what a
delta cannot hold falls back to a full build, saying why."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from kr.cli import main
from kr.local import local_service
from router.contract import QueryRequest
from router.sync import run_sync
from tests.common import ALFA, KNOWLEDGE

EXTRA = """---
semanticId: extra.note
title: Nota extra sobre talabartes
---
# Nota extra sobre talabartes

O talabarte duplo com absorvedor de energia exige inspeção visual antes de cada uso.
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    copy = tmp_path / "knowledge"
    shutil.copytree(KNOWLEDGE, copy)
    return copy


def build(
    folder: Path, state: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[str, str]:
    """(the version ``kr build`` activated, what it said on stderr)."""
    argv = ["build", str(folder), "--state", str(state), "--embedder", "none", *extra]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    found = re.search(r"knowledge version (kv-[0-9a-f]+)", out)
    assert found, out
    return found.group(1), err


def ask(state: Path, query: str, tenant: str | None = None) -> list[str]:
    """The documents the active version of ``state`` ranks for ``query`` (no cache)."""
    service = local_service(state, cache=False)
    response = run_sync(service.query(QueryRequest(query=query, tenant=tenant)))
    return [r.doc_id for r in response.results]


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + text, "utf-8")


def test_an_edit_an_addition_and_a_removal_are_a_delta_served_as_a_full_build_would(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    first, said = build(folder, state, capsys)
    assert "full build: no full build is recorded" in said
    again, said = build(folder, state, capsys)
    assert again == first  # nothing changed: the base version itself
    assert "delta build" in said and "0 changed or added, 0 removed" in said

    append(folder / "apr" / "validade.md", "\n\nO guarda-corpo telescópico exige inspeção.\n")
    (folder / "epi" / "troca.md").unlink()
    (folder / "extra.md").write_text(EXTRA, "utf-8")
    delta, said = build(folder, state, capsys)
    assert f"delta build on {first}: 2 changed or added, 1 removed" in said
    assert delta != first
    full, _ = build(folder, tmp_path / "fresh", capsys, "--full")
    for query in ("guarda-corpo telescópico", "talabarte duplo absorvedor", "epi.replacement"):
        served = ask(state, query)
        assert served[:3] == ask(tmp_path / "fresh", query)[:3], query
        assert "epi.replacement" not in served
    assert ask(state, "guarda-corpo telescópico")[0] == "apr.validity"
    assert full != delta


def test_the_delta_uploads_only_its_own_files(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    build(folder, state, capsys)
    append(folder / "apr" / "validade.md", "\n\nUma linha nova.\n")
    argv = ["build", str(folder), "--state", str(state), "--embedder", "none"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    summary = re.search(r"blobs: (\d+) uploaded .* (\d+) of its base kv-", printed)
    assert summary, printed
    uploaded, in_base = int(summary.group(1)), int(summary.group(2))
    assert uploaded < 0.3 * (uploaded + in_base)  # the delta's chunks, bundle, the manifest


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("tenant", "has no partition yet"),
        ("duplicate", "is defined by another file too"),
        ("synonyms", "synonyms or embedder changed"),
        ("everything", "exceed the delta bound"),
        ("base gone", "cannot be read"),
    ],
)
def test_what_a_delta_cannot_hold_is_a_full_build(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], change: str, reason: str
) -> None:
    state = tmp_path / "state"
    first, _ = build(folder, state, capsys)
    if change == "base gone":  # e.g. deleted by hand: the next build cannot amend it
        append(folder / "apr" / "validade.md", "\n\nRevisado.\n")
        (state / "r2" / "packages" / first / "shared.partition.bin").unlink()
    elif change == "tenant":
        text = EXTRA.replace("title:", "tenant: empresa-nova\ntitle:")
        (folder / "nova.md").write_text(text, "utf-8")
    elif change == "duplicate":
        shutil.copy(folder / "apr" / "validade.md", folder / "apr" / "copia.md")
    elif change == "synonyms":
        append(folder / "_synonyms.yml", "\n- [talabarte, cordão de segurança]\n")
    else:
        for path in folder.rglob("*.md"):
            append(path, "\n\nRevisado.\n")
    if change == "duplicate":  # the full build skips the later file in path order, naming both
        _, said = build(folder, state, capsys)
        assert "full build: " in said and reason in said
        assert (
            "apr/validade.md:2: semanticId 'apr.validity' is also defined in apr/copia.md" in said
        )
        assert "apr/validade.md is skipped" in said
        return
    version, said = build(folder, state, capsys)
    assert "full build: " in said and reason in said
    fresh, _ = build(folder, tmp_path / "fresh", capsys, "--full")
    assert version == fresh


def test_a_malformed_edit_is_reported_and_its_old_copy_is_gone_or_strict_keeps_serving(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    build(folder, state, capsys)
    path = folder / "epi" / "troca.md"
    path.write_text("---\ntitle: [unclosed\n---\n# X\n", "utf-8")
    argv = ["build", str(folder), "--state", str(state), "--embedder", "none", "--strict"]
    assert main(argv) != 0
    assert "epi/troca.md:" in capsys.readouterr().err
    assert "epi.replacement" in ask(state, "epi.replacement")  # the active version serves
    _, said = build(folder, state, capsys)
    assert "epi/troca.md:" in said and "delta build" in said
    assert "epi.replacement" not in ask(state, "epi.replacement")  # skipped, as in full builds


def test_a_tenant_edit_stays_in_its_tenant(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    build(folder, state, capsys)
    alfa = next((folder / "tenants" / "construtora-alfa").glob("andaimes.md"))
    append(alfa, "\n\nO rodapé metálico do andaime deve ter quinze centímetros.\n")
    _, said = build(folder, state, capsys)
    assert "delta build" in said
    assert "rodape" not in " ".join(ask(state, "rodapé metálico quinze centímetros"))
    found = ask(state, "rodapé metálico quinze centímetros", tenant=ALFA)
    assert found and found[0].startswith("construtoraAlfa")
    anonymous = ask(state, "rodapé metálico quinze centímetros")
    assert all(not doc.startswith("construtoraAlfa") for doc in anonymous)
