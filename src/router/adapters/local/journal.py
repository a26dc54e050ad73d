"""Publish journal as JSON files in the local state folder, one per target + version.

Why files: ``kr publish`` runs as a short process; what it finished must survive the process (an
interrupted publish resumes from the journal) and be readable by a person (``cat`` tells which
steps of which version reached which target). Each write replaces the file atomically.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["JOURNAL_DIR", "FileJournal"]

JOURNAL_DIR = "publish-journal"
"""Folder of the journal inside the state folder."""

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


class FileJournal:
    """:class:`~router.ports.PublishJournal` over ``<root>/<target hash>-<version>.json``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path(self, target: str, version: str) -> Path:
        digest = hashlib.sha256(target.encode()).hexdigest()[:12]
        return self.root / f"{digest}-{_SAFE.sub('_', version)}.json"

    def _read(self, target: str, version: str) -> dict[str, Any]:
        path = self.path(target, version)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {"target": target, "version": version, "steps": []}
        except (OSError, ValueError):
            # An unreadable journal only costs redoing idempotent steps: start afresh.
            return {"target": target, "version": version, "steps": []}
        if data.get("target") != target or data.get("version") != version:
            return {"target": target, "version": version, "steps": []}
        return dict(data)

    def _write(self, data: dict[str, Any]) -> None:
        path = self.path(data["target"], data["version"])
        path.parent.mkdir(parents=True, exist_ok=True)
        data["updated_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, ensure_ascii=False, indent=1)
        os.replace(tmp, path)

    async def done(self, target: str, version: str) -> set[str]:
        return set(self._read(target, version)["steps"])

    async def record(self, target: str, version: str, step: str) -> None:
        data = self._read(target, version)
        if step not in data["steps"]:
            data["steps"].append(step)
        self._write(data)

    async def forget(self, target: str, version: str, steps: Sequence[str]) -> None:
        data = self._read(target, version)
        data["steps"] = [step for step in data["steps"] if step not in set(steps)]
        self._write(data)
