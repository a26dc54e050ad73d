"""``kr build --watch``: a save is built, gated and served within seconds; a bad save is not."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from kr.cli import _parser, main
from kr.commands.build import watch
from router.adapters.local.state import LocalState
from router.knowledge.model import ALL_TENANTS
from router.knowledge.parser import parse_document
from router.ports import ACTIVE_VERSION_KEY
from tests.common import KNOWLEDGE

WAIT_S = 90.0


def shared_doc(folder: Path, path: Path) -> str | None:
    """The semantic id of a shared (any tenant) document, None for a tenant's own."""
    doc = parse_document(path.relative_to(folder).as_posix(), path.read_bytes())
    return doc.semantic_id if doc.tenant == ALL_TENANTS else None


async def active(state: LocalState) -> str | None:
    return await state.kv.get(ACTIVE_VERSION_KEY)


async def changed_from(state: LocalState, version: str | None) -> str:
    """The active version once it differs from ``version`` (fails after ``WAIT_S``)."""
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while asyncio.get_running_loop().time() < deadline:
        now = await active(state)
        if now is not None and now != version:
            return now
        await asyncio.sleep(0.2)
    raise AssertionError(f"the active version stayed {version}")


def test_a_save_is_rebuilt_gated_and_activated_and_a_broken_save_is_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "knowledge"
    shutil.copytree(KNOWLEDGE, folder)
    state_dir = tmp_path / "state"
    argv = ["build", str(folder), "--watch", "--strict", "--embedder", "none"]
    args = _parser().parse_args([*argv, "--state", str(state_dir)])
    state = LocalState(state_dir)
    target = next(p for p in sorted(folder.rglob("*.md")) if shared_doc(folder, p) is not None)

    async def scenario() -> tuple[str, str, str | None]:
        stop = asyncio.Event()
        watching = asyncio.create_task(watch(args, stop))
        first = await changed_from(state, None)
        await asyncio.sleep(0.5)  # the watcher is up
        broken = folder / "broken.md"
        broken.write_text("---\ntitle: [unclosed\n---\n# X\n", "utf-8")
        await asyncio.sleep(3)
        after_broken = await active(state)
        broken.unlink()
        target.write_text(target.read_text("utf-8") + "\n\nCalibração com zircônio.\n", "utf-8")
        second = await changed_from(state, first)
        stop.set()
        await asyncio.wait_for(watching, 30)
        return first, second, after_broken

    first, second, after_broken = asyncio.run(scenario())
    said = capsys.readouterr().out
    assert after_broken == first  # the broken save was refused, the last good one kept serving
    assert "build failed" in said and "broken.md" in said
    assert second != first and "knowledge version " + second in said
    ask = ["query", "calibração com zircônio", "--state", str(state_dir), "--json"]
    assert main(ask) == 0
    served = json.loads(capsys.readouterr().out)
    assert served["results"][0]["doc_id"] == shared_doc(folder, target)
