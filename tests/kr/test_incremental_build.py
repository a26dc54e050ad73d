"""A full ``kr build`` reuses the documents it parsed before, and builds what ``--full`` builds
(the delta builds between full ones: tests/kr/test_delta_build.py)."""

from __future__ import annotations

import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from kr.cli import main
from kr.document_cache import CACHE_FILE, DocumentCache
from router.compile.corpus import load_knowledge
from tests.common import KNOWLEDGE

Built = tuple[str, str]


def build(folder: Path, state: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> Built:
    """The version ``kr build --no-activate`` published, and what it said it reused on stderr."""
    argv = ["build", str(folder), "--state", str(state), "--embedder", "none", "--no-activate"]
    assert main([*argv, *extra]) == 0
    out, err = capsys.readouterr()
    found = re.search(r"knowledge version (kv-[0-9a-f]+)", out)
    assert found, out
    said = re.search(r"parsed .*", err)
    return found.group(1), said.group(0) if said else ""


def version(built: Built) -> str:
    return built[0]


def reused(built: Built) -> str:
    return built[1]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    copy = tmp_path / "knowledge"
    shutil.copytree(KNOWLEDGE, copy)
    return copy


def edit(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    path.write_text(text + "\n\nUm parágrafo novo sobre inspeção de talabartes.\n", "utf-8")


def test_a_full_rebuild_parses_only_what_changed_and_equals_a_fresh_one(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--out`` writes a whole package, so every build here is a full one (no delta)."""
    state = tmp_path / "state"
    out = ("--out", str(tmp_path / "out"))
    files = sorted(p for p in folder.rglob("*.md") if not p.name.startswith("_"))
    first = build(folder, state, capsys, *out)
    assert reused(first) == f"parsed {len(files)} file(s), reused 0 unchanged"
    again = build(folder, state, capsys, *out)
    assert reused(again) == f"parsed 0 file(s), reused {len(files)} unchanged"
    assert version(again) == version(first)

    edit(files[3])
    files[7].unlink()
    (folder / "extra.md").write_text(
        "---\nsemanticId: extra.note\ntitle: Nota extra\n---\n\n# Nota extra\n\nTexto novo.\n",
        "utf-8",
    )
    incremental = build(folder, state, capsys, *out)
    assert reused(incremental) == f"parsed 2 file(s), reused {len(files) - 2} unchanged"
    full = build(folder, tmp_path / "fresh", capsys, "--full")
    assert version(incremental) == version(full) != version(first)
    stored = sqlite3.connect(state / CACHE_FILE).execute("SELECT count(*) FROM documents")
    assert stored.fetchone()[0] == len(files)  # the removed file's entry is gone, extra.md's added


def test_reused_documents_equal_parsed_ones_and_a_damaged_entry_is_parsed_again(
    folder: Path, tmp_path: Path
) -> None:
    cache = DocumentCache(tmp_path)
    parsed = load_knowledge(folder, reuse=cache).documents
    cache.close()
    damaged = sqlite3.connect(tmp_path / CACHE_FILE)
    damaged.execute("UPDATE documents SET doc = x'00' WHERE path = ?", (parsed[0].path,))
    damaged.commit()
    cache = DocumentCache(tmp_path)
    reread = load_knowledge(folder, reuse=cache).documents
    assert (cache.hits, cache.misses) == (len(parsed) - 1, 1)
    assert reread == parsed


def test_a_malformed_file_is_never_reused_and_is_reported_every_build(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "broken.md").write_text("---\ntitle: [unclosed\n---\n# X\n", "utf-8")
    state = tmp_path / "state"
    for _ in range(2):
        build(folder, state, capsys)
    argv = ["build", str(folder), "--state", str(state), "--embedder", "none", "--no-activate"]
    assert main(argv) == 0
    assert "broken.md:" in capsys.readouterr().err
