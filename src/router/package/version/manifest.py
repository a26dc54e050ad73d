"""The package manifest: what a knowledge version contains and the sha256 of every artifact.

Why content hashes: a blob store may hand back a partial or stale object; the runtime refuses any
artifact whose hash differs, and the knowledge version itself is derived from the hashes, so the
same input always yields the same version id.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from router.errors import IntegrityError, PackageFormatError
from router.package.format.bundle import BUNDLE_NAME
from router.package.version.content_names import is_lazy
from router.package.version.partitions import (
    PartitionEntry,
    check_partitions,
    partition_file,
    partition_of,
)

__all__ = [
    "FORMAT_VERSION",
    "MANIFEST_NAME",
    "VECTORS_NAME",
    "Manifest",
    "check_version_id",
    "dumps_json",
    "sha256_hex",
]

FORMAT_VERSION = 3
MANIFEST_NAME = "manifest.json"
VECTORS_NAME = "vectors.bin"  # in every partition when the manifest names an embedding model
_VERSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")  # "kv-" + 16 hex digits when built


def check_version_id(version: str) -> str:
    """``version`` when it can name a package (letters, digits, ``-`` and ``_``, at most 100),
    else ``PackageFormatError``: a version id read from KV becomes a blob key, so a damaged or
    hostile value (``../../etc``) must be refused before any read, like a corrupt package."""
    if not _VERSION_ID.fullmatch(version):
        raise PackageFormatError(f"invalid knowledge version id {version[:100]!r}")
    return version


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def dumps_json(value: Any) -> bytes:
    """Canonical JSON (sorted keys, no spaces, UTF-8) so equal content gives equal bytes."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Manifest:
    """Parsed ``manifest.json``."""

    knowledge_version: str
    format_version: int
    analyzer: dict[str, Any]
    bm25: dict[str, Any]
    counts: dict[str, int]
    artifacts: dict[str, dict[str, Any]]
    source: dict[str, Any] = field(default_factory=dict)
    index: dict[str, Any] = field(default_factory=dict)  # scoring, blocks, field weights
    embedding: dict[str, Any] | None = None  # {"model", "dimensions"} of vectors.bin
    partitions: tuple[PartitionEntry, ...] = ()  # shared first, then tenants by key

    @property
    def artifact_names(self) -> tuple[str, ...]:
        """Artifacts this package must have: each partition's bundle (its resident files,
        ``router.package.format.bundle``), its vectors when embedded."""
        names = (BUNDLE_NAME,) + ((VECTORS_NAME,) if self.embedding else ())
        return tuple(partition_file(p.key, name) for p in self.partitions for name in names)

    def home(self, name: str) -> str:
        """The version whose folder holds resident file ``name``: this one, or for a delta's
        unchanged base files the base version that published them (docs/adr/0020)."""
        entry = self.artifacts.get(name) or {}
        return str(entry.get("home") or self.knowledge_version)

    def partition_home(self, key: str) -> str:
        """The version that published partition ``key`` (its bundle, its D1 rows, vectors)."""
        return self.home(partition_file(key, BUNDLE_NAME))

    def published_here(self, key: str) -> bool:
        """Whether this version published partition ``key`` (not a delta's base partition)."""
        return self.partition_home(key) == self.knowledge_version

    @property
    def bases(self) -> list[str]:
        """The other versions whose files, rows and vectors this one uses (a delta's base)."""
        return sorted({self.home(name) for name in self.artifacts} - {self.knowledge_version})

    def partition(self, key: str) -> PartitionEntry | None:
        return next((p for p in self.partitions if p.key == key), None)

    def names_to_read(
        self, *, with_vectors: bool = True, partitions: Collection[str] | None = None
    ) -> list[str]:
        """The resident artifacts a reader fetches (without ``vectors.bin`` unless
        ``with_vectors``; of the ``partitions`` keys only, when given); the lazily read files
        are listed by the partitions' directories (``router.package.version.listing``), not here."""
        names = []
        for name in self.artifact_names:
            key, file = partition_of(name)
            if (with_vectors or file != VECTORS_NAME) and (partitions is None or key in partitions):
                names.append(name)
        return names

    @classmethod
    def create(
        cls,
        artifacts: Mapping[str, bytes],
        analyzer: dict[str, Any],
        bm25: dict[str, Any],
        counts: dict[str, int],
        source: dict[str, Any],
        index: dict[str, Any] | None = None,
        embedding: dict[str, Any] | None = None,
        partitions: tuple[PartitionEntry, ...] = (),
        homes: Mapping[str, str] | None = None,
    ) -> Manifest:
        """``homes``: resident files another version published (name → that version), which
        this one names where they are instead of storing them again (a delta's base files)."""
        listing: dict[str, dict[str, Any]] = {
            name: {"sha256": sha256_hex(blob), "bytes": len(blob)}
            for name, blob in sorted(artifacts.items())
        }
        index = index or {}
        identity = dumps_json(
            {
                "artifacts": listing,
                "analyzer": analyzer,
                "bm25": bm25,
                "index": index,
                "embedding": embedding,
                "partitions": [p.to_dict() for p in partitions],
            }
        )
        version = "kv-" + sha256_hex(identity)[:16]
        for name, home in (homes or {}).items():
            if name in listing and home != version:
                listing[name]["home"] = home
        return cls(
            version,
            FORMAT_VERSION,
            analyzer,
            bm25,
            counts,
            listing,
            source,
            index,
            embedding,
            tuple(partitions),
        )

    def to_bytes(self) -> bytes:
        return dumps_json(
            {
                "knowledge_version": self.knowledge_version,
                "format_version": self.format_version,
                "analyzer": self.analyzer,
                "bm25": self.bm25,
                "counts": self.counts,
                "artifacts": self.artifacts,
                "source": self.source,
                "index": self.index,
                "embedding": self.embedding,
                "partitions": [p.to_dict() for p in self.partitions],
            }
        )

    @classmethod
    def from_bytes(cls, blob: bytes) -> Manifest:
        try:
            data = json.loads(blob)
            manifest = cls(
                knowledge_version=str(data["knowledge_version"]),
                format_version=int(data["format_version"]),
                analyzer=dict(data["analyzer"]),
                bm25=dict(data["bm25"]),
                counts={k: int(v) for k, v in data["counts"].items()},
                artifacts={k: dict(v) for k, v in data["artifacts"].items()},
                source=dict(data.get("source", {})),
                index=dict(data.get("index", {})),
                embedding=dict(data["embedding"]) if data.get("embedding") else None,
                partitions=tuple(PartitionEntry.from_dict(p) for p in data["partitions"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise PackageFormatError(f"manifest.json is malformed: {exc}") from exc
        if manifest.format_version != FORMAT_VERSION:
            raise PackageFormatError(
                f"package format {manifest.format_version} is not supported "
                f"(this router reads format {FORMAT_VERSION})"
            )
        check_partitions(manifest.partitions)
        keys = {p.key for p in manifest.partitions}
        if any(partition_of(name)[0] not in keys for name in manifest.artifacts):
            raise PackageFormatError("manifest lists an artifact of no partition")
        if any(is_lazy(name) for name in manifest.artifacts):
            raise PackageFormatError("manifest lists a lazily read file (its directory names it)")
        missing = [name for name in manifest.artifact_names if name not in manifest.artifacts]
        if missing:
            raise PackageFormatError(f"manifest lists no {', '.join(missing)}")
        return manifest

    def verify(self, name: str, blob: bytes) -> bytes:
        """Return ``blob`` if it is the artifact the manifest describes, else raise."""
        entry = self.artifacts.get(name)
        if entry is None:
            raise PackageFormatError(f"artifact {name!r} is not part of this package")
        if len(blob) != entry["bytes"] or sha256_hex(blob) != entry["sha256"]:
            raise IntegrityError(
                f"artifact {name!r} of {self.knowledge_version} fails its sha256 check "
                f"({len(blob)} bytes, expected {entry['bytes']})"
            )
        return blob
