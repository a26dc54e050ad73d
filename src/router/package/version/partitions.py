"""Partitions of a package (index format 3, docs/adr/0010): who owns them and their file names.

Why partitions: a tenant's query must never be influenced by another tenant's documents — not
their terms, statistics, ids or spellings. So each tenant's documents are compiled alone into a
partition of their own, next to one shared partition (documents of tenant ``*``), and a query
reads the shared partition and at most the caller's own. The files of a partition are prefixed
with its key, so adding a document to one tenant changes only that tenant's files.

Section numbers: the shared partition numbers its sections 0 … S−1; every tenant partition
numbers its own from S, so that a query's view (shared + own) has one range of section numbers
without any renumbering at query time. Two tenants' numbers overlap, and never meet in one view.

Delta partitions (docs/adr/0020): an incremental build leaves every base partition as it was
and puts the documents changed since in a small partition that *amends* its base (key
``<base key>-d``), listed after every base partition. The shared delta numbers its sections from
the end of the largest base range (``top``), every tenant's delta right after the shared delta,
so no base number moves and a view (shared, own, shared delta, own delta) stays ascending; the
numbers between the caller's own base and the shared delta are a gap no section holds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from router.errors import PackageFormatError
from router.knowledge.model import ALL_TENANTS

__all__ = [
    "DELTA_SUFFIX",
    "PARTITION_FILES",
    "SHARED_PARTITION",
    "PartitionEntry",
    "check_deltas",
    "check_partitions",
    "delta_key",
    "delta_numbering",
    "partition_file",
    "partition_key",
    "partition_of",
]

SHARED_PARTITION = "shared"
PARTITION_FILES: tuple[str, ...] = (
    "docs.bin",
    "records.bin",
    "synonyms.json",
    "terms.bin",
    "lexicon.bin",
    "postings.bin",
    "words.bin",
    "texts.bin",
    "exact.bin",
    "graph.bin",
)
"""The resident files every partition has, bundled into its ``partition.bin``
(``router.package.format.bundle``); ``vectors.bin`` sits apart when the package is embedded, and the
lazily read files are named by the directories among these."""


def partition_key(tenant: str) -> str:
    """The key of the partition holding ``tenant``'s documents: ``shared`` for ``*``, else
    ``t-`` and 16 hex digits of the tenant's sha256 (a safe, fixed-length R2 key segment)."""
    if tenant == ALL_TENANTS:
        return SHARED_PARTITION
    return "t-" + hashlib.sha256(tenant.encode("utf-8")).hexdigest()[:16]


DELTA_SUFFIX = "-d"


def delta_key(key: str) -> str:
    """The key of the delta partition amending the base partition ``key``."""
    return f"{key}{DELTA_SUFFIX}"


def partition_file(key: str, name: str) -> str:
    """The package file ``name`` of partition ``key``: ``<key>.<name>``."""
    return f"{key}.{name}"


def partition_of(name: str) -> tuple[str, str]:
    """(partition key, file name) of a package file; refuses a name without a partition."""
    key, dot, rest = name.partition(".")
    if not dot or not rest:
        raise PackageFormatError(f"artifact {name!r} names no partition")
    return key, rest


@dataclass(frozen=True)
class PartitionEntry:
    """One partition as the manifest lists it."""

    key: str
    tenant: str
    documents: int
    sections: int
    first_section: int  # 0 for the shared partition, the shared section count for a tenant's
    amends: str | None = None  # a delta partition: the key of the base partition it amends

    @property
    def end_section(self) -> int:
        return self.first_section + self.sections

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "key": self.key,
            "tenant": self.tenant,
            "documents": self.documents,
            "sections": self.sections,
            "first_section": self.first_section,
        }
        if self.amends is not None:
            found["amends"] = self.amends
        return found

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PartitionEntry:
        entry = cls(
            key=str(data["key"]),
            tenant=str(data["tenant"]),
            documents=int(data["documents"]),
            sections=int(data["sections"]),
            first_section=int(data["first_section"]),
            amends=None if data.get("amends") is None else str(data["amends"]),
        )
        base = partition_key(entry.tenant)
        expected = base if entry.amends is None else delta_key(base)
        if (
            entry.key != expected
            or entry.amends not in (None, base)
            or min(entry.documents, entry.sections) < 0
        ):
            raise PackageFormatError(f"manifest partition {entry.key!r} is inconsistent")
        return entry


def check_partitions(entries: Sequence[PartitionEntry]) -> None:
    """The shared partition first, each tenant once, tenant numbering after the shared range;
    then the deltas, each amending a base partition listed before it, numbered from the top of
    the base ranges (the shared delta first, the tenants' after it)."""
    if not entries or entries[0].key != SHARED_PARTITION or entries[0].first_section != 0:
        raise PackageFormatError("the manifest's first partition must be the shared one")
    shared = entries[0].sections
    keys = [entry.key for entry in entries]
    if len(set(keys)) != len(keys):
        raise PackageFormatError("the manifest lists a partition twice")
    bases = [entry for entry in entries if entry.amends is None]
    deltas = entries[len(bases) :]
    if any(entry.amends is None for entry in deltas):
        raise PackageFormatError("a base partition is listed after a delta")
    if any(entry.first_section != shared for entry in bases[1:]):
        raise PackageFormatError("a tenant partition does not number its sections after shared")
    check_deltas(bases, deltas)


def delta_numbering(bases: Sequence[PartitionEntry], shared_delta_sections: int) -> tuple[int, int]:
    """(first section of the shared delta, first section of every tenant's delta)."""
    top = max(entry.end_section for entry in bases)
    return top, top + shared_delta_sections


def check_deltas(bases: Sequence[PartitionEntry], deltas: Sequence[PartitionEntry]) -> None:
    """Each delta amends a listed base; numbering as ``delta_numbering`` says."""
    base_keys = {entry.key for entry in bases}
    if any(entry.amends not in base_keys for entry in deltas):
        raise PackageFormatError("a delta partition amends no partition of the manifest")
    shared = next((entry for entry in deltas if entry.amends == SHARED_PARTITION), None)
    if shared is not None and deltas[0] is not shared:
        raise PackageFormatError("the shared delta must be the first delta")
    top, tenants = delta_numbering(bases, shared.sections if shared else 0)
    for entry in deltas:
        if entry.first_section != (top if entry is shared else tenants):
            raise PackageFormatError(f"delta partition {entry.key!r} is numbered out of place")
