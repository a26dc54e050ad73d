"""A package's files written to a folder as the build makes them, read back when asked.

Why: a package of a million sections is ≈ 0.9 GB of files (posting shards, text and record
chunks …), and a build held them all as bytes until the publish had read them (a seventh of
its peak). ``compile_documents(store=StagedFiles(folder))`` writes each lazy file as soon as
its encoder returns it; ``kr build`` copies them to ``--out`` and publishes from here, one
file at a time. Names are flat (``<partition>.<name>``), as in a package folder.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path

__all__ = ["PackageFiles", "StagedFiles"]


class StagedFiles(MutableMapping[str, bytes]):
    """Files by name in ``folder``: setting one writes it, getting one reads it; the names
    and sizes are kept (``size_of`` needs no read: ``router.ops.publish_plan.KnownSizes``)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._sizes: dict[str, int] = {}

    def __setitem__(self, name: str, blob: bytes) -> None:
        self.path(name).write_bytes(blob)
        self._sizes[name] = len(blob)

    def __getitem__(self, name: str) -> bytes:
        if name not in self._sizes:
            raise KeyError(name)
        return self.path(name).read_bytes()

    def __delitem__(self, name: str) -> None:
        del self._sizes[name]
        self.path(name).unlink()

    def __iter__(self) -> Iterator[str]:
        return iter(self._sizes)

    def __len__(self) -> int:
        return len(self._sizes)

    def __contains__(self, name: object) -> bool:
        return name in self._sizes

    def size_of(self, name: str) -> int:
        return self._sizes[name]

    def path(self, name: str) -> Path:
        if "/" in name or name.startswith("."):
            raise ValueError(f"not a package file name: {name!r}")
        return self.folder / name

    def copy_to(self, name: str, target: Path) -> None:
        """Copy one file without reading it into memory."""
        shutil.copyfile(self.path(name), target)


class PackageFiles(Mapping[str, bytes]):
    """A package's files: its manifest's bytes, then the staged files (``CompiledPackage``)."""

    def __init__(self, manifest_name: str, manifest: bytes, staged: StagedFiles) -> None:
        self._manifest_name = manifest_name
        self._manifest = manifest
        self.staged = staged

    def __getitem__(self, name: str) -> bytes:
        return self._manifest if name == self._manifest_name else self.staged[name]

    def __iter__(self) -> Iterator[str]:
        yield self._manifest_name
        yield from (name for name in self.staged if name != self._manifest_name)

    def __len__(self) -> int:
        return len(self.staged) + (self._manifest_name not in self.staged)

    def __contains__(self, name: object) -> bool:
        return name == self._manifest_name or name in self.staged

    def size_of(self, name: str) -> int:
        return len(self._manifest) if name == self._manifest_name else self.staged.size_of(name)
