"""Publish journal as files in the local state folder, one per target + version.

Why files: ``kr publish`` runs as a short process; what it finished must survive the process (an
interrupted publish resumes from the journal) and be readable by a person (``cat`` tells which
steps of which version reached which target).

Why lines appended, not one JSON document rewritten: a package of a million sections has ~78k
blob steps; rewriting the whole list after each one wrote O(n²) bytes (tens of GB). Each event
is one JSON line — the header ``{"target", "version"}``, then ``{"done": step}`` or
``{"forget": [steps]}`` — replayed on read. A line cut short by a crash is ignored: that step
is simply run again (every step is idempotent). A journal of the earlier format
(``<name>.json``, ``{"steps": [...]}``) is still read.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["JOURNAL_DIR", "FileJournal"]

JOURNAL_DIR = "publish-journal"
"""Folder of the journal inside the state folder."""

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


class FileJournal:
    """:class:`~router.ports.PublishJournal` over ``<root>/<target hash>-<version>.jsonl``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path(self, target: str, version: str) -> Path:
        digest = hashlib.sha256(target.encode()).hexdigest()[:12]
        return self.root / f"{digest}-{_SAFE.sub('_', version)}.jsonl"

    def _legacy(self, target: str, version: str) -> set[str]:
        path = self.path(target, version).with_suffix(".json")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return set()
        if data.get("target") != target or data.get("version") != version:
            return set()
        return set(data.get("steps", []))

    def _replay(self, target: str, version: str) -> set[str] | None:
        """The done steps, or None when there is no journal of this target + version."""
        try:
            lines = self.path(target, version).read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return None
        except OSError:
            return set()  # unreadable: only costs redoing idempotent steps
        events: list[dict[str, Any]] = []
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                events.append(event)
        if not events or events[0].get("target") != target or events[0].get("version") != version:
            return set()
        done: set[str] = set()
        for event in events[1:]:
            if isinstance(event.get("done"), str):
                done.add(event["done"])
            elif isinstance(event.get("forget"), list):
                done.difference_update(event["forget"])
        return done

    def _append(self, target: str, version: str, event: dict[str, Any]) -> None:
        path = self.path(target, version)
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = []
        if not path.exists():
            header = {"target": target, "version": version}
            header["started_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            lines.append(json.dumps(header, ensure_ascii=False))
            lines += [json.dumps({"done": s}) for s in sorted(self._legacy(target, version))]
        lines.append(json.dumps(event, ensure_ascii=False))
        with path.open("a", encoding="utf-8") as handle:
            handle.write("\n" + "\n".join(lines) + "\n")  # a torn line never joins the next

    async def done(self, target: str, version: str) -> set[str]:
        replayed = self._replay(target, version)
        return self._legacy(target, version) if replayed is None else replayed

    async def record(self, target: str, version: str, step: str) -> None:
        self._append(target, version, {"done": step})

    async def forget(self, target: str, version: str, steps: Sequence[str]) -> None:
        self._append(target, version, {"forget": list(steps)})

    async def discard(self, target: str, version: str) -> None:
        """Remove the journal of ``target`` + ``version`` (``kr gc`` dropped the version)."""
        for path in (self.path(target, version), self.path(target, version).with_suffix(".json")):
            path.unlink(missing_ok=True)

    def versions(self) -> list[tuple[Path, str]]:
        """Every journal file and the version it is for (``kr gc`` removes dropped ones)."""
        found: list[tuple[Path, str]] = []
        for path in sorted(self.root.glob("*.json*")):
            try:
                first = path.read_text(encoding="utf-8").lstrip().split("\n", 1)[0]
                header = json.loads(first if path.suffix == ".jsonl" else path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(header, dict) and isinstance(header.get("version"), str):
                found.append((path, header["version"]))
        return found
