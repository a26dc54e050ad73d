"""``kr gc``: exit statuses and output, on the local state."""

from __future__ import annotations

from pathlib import Path

import pytest

from kr.cli import ERROR_EXIT, main
from tests.common import write_doc


def _build(folder: Path, state: str, text: str, *extra: str) -> None:
    write_doc(folder, "a.md", f"---\nsemanticId: a\ntitle: Documento A\n---\n{text}\n")
    write_doc(folder, "b.md", "---\nsemanticId: b\ntitle: Documento B\n---\nOutro texto.\n")
    argv = ["build", str(folder), "--state", state, "--embedder", "none", "--force", *extra]
    assert main(argv) == 0


def test_gc_dry_run_then_collect(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = str(tmp_path / "state")
    for text in ("Primeira versão.", "Segunda versão.", "Terceira versão."):
        _build(tmp_path / "kb", state, text, "--full")
    out = capsys.readouterr().out
    assert "uploaded" in out and "already there" in out  # kr build reports the delta

    assert main(["gc", "--keep", "0", "--dry-run", "--state", state]) == 0
    out = capsys.readouterr().out
    assert "keeping 2 version(s), dropping 1" in out and "(active)" in out
    assert "(previous (rollback))" in out and "would delete" in out
    assert "dry run: nothing was deleted" in out
    versions = sorted(p.name for p in (tmp_path / "state" / "r2" / "packages").iterdir())
    assert len(versions) == 4  # three versions and the shared objects

    assert main(["gc", "--keep", "0", "--state", state]) == 0
    out = capsys.readouterr().out
    assert "deleting:" in out and "blobs deleted" in out
    assert len(list((tmp_path / "state" / "r2" / "packages").iterdir())) == 3
    assert main(["query", "Documento A", "--state", state]) == 0
    assert main(["rollback", "--state", state]) == 0

    assert main(["gc", "--keep", "5", "--state", state]) == 0
    assert "dropping 0" in capsys.readouterr().out


def test_gc_keeps_the_full_build_the_kept_deltas_amend(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = str(tmp_path / "state")
    for text in ("Primeira versão.", "Segunda versão.", "Terceira versão."):
        _build(tmp_path / "kb", state, text)  # a full build, then two deltas of it
    capsys.readouterr()
    assert main(["gc", "--keep", "0", "--state", state]) == 0
    assert "keeping 3 version(s), dropping 0" in capsys.readouterr().out
    assert main(["query", "Terceira versão", "--state", state]) == 0
    assert "Terceira versão" in capsys.readouterr().out


def test_gc_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = str(tmp_path / "state")
    assert main(["gc", "--keep", "-1", "--state", state]) == ERROR_EXIT
    assert "--keep must be 0 or more" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["gc", "--state", state])  # --keep is required
    assert info.value.code == 2
    assert main(["gc", "--keep", "0", "--state", state]) == 0  # an empty state: nothing to do
    assert "keeping 0 version(s), dropping 0" in capsys.readouterr().out
