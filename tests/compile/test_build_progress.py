"""``kr build`` reports its progress: files parsed, documents compiled, files written."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from router.compile.build import build_knowledge, write_package
from router.compile.corpus import knowledge_files
from tests.common import KNOWLEDGE


def test_every_phase_runs_to_its_total(tmp_path: Path) -> None:
    totals: dict[str, int] = {}
    done: Counter[str] = Counter()

    def phase(name: str, total: int):  # type: ignore[no-untyped-def]
        totals[name] = total

        def advance(count: int) -> None:
            done[name] += count
            assert done[name] <= totals[name], name

        return advance

    result = build_knowledge(KNOWLEDGE, phases=phase)
    target = write_package(result.package, tmp_path, phase)
    assert totals["parse"] == len(knowledge_files(KNOWLEDGE)) == done["parse"] > 50
    assert totals["compile"] == len(result.corpus.documents) == done["compile"]
    assert totals["write"] == done["write"] == len(list(target.iterdir()))
    assert all(
        not part.startswith(("_", ".")) for f in knowledge_files(KNOWLEDGE) for part in f.split("/")
    )
