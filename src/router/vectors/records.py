"""Section vectors as Vectorize records: ids, tenant namespaces and filterable metadata.

Why namespaces per tenant: Vectorize searches one namespace per query, so a tenant's query asks
its own namespace and the shared one and can never reach another tenant's vectors. The knowledge
version is in every record's metadata and every query's filter, so one version is served at a time.
"""

from __future__ import annotations

from router.knowledge.model import ALL_TENANTS
from router.package.partition import Partition
from router.package.reader import KnowledgePackage
from router.ports import VectorRecord

__all__ = [
    "SHARED_NAMESPACE",
    "namespace_for",
    "query_namespaces",
    "section_records",
    "tombstoned_sections",
    "vector_id",
]

SHARED_NAMESPACE = "shared"


def namespace_for(tenant: str) -> str:
    return SHARED_NAMESPACE if tenant == ALL_TENANTS else f"t:{tenant}"


def query_namespaces(tenant: str | None) -> list[str]:
    """Namespaces a query may search: the shared one plus the asking tenant's."""
    return [SHARED_NAMESPACE] + ([namespace_for(tenant)] if tenant else [])


def vector_id(version: str, section: int) -> str:
    """``<version>:<section index>`` — short (Vectorize ids are ≤ 64 bytes) and version-scoped."""
    return f"{version}:{section}"


async def section_records(
    package: KnowledgePackage, published_here: bool = False
) -> list[VectorRecord]:
    """Every section vector of the package with its namespace and metadata; ids number the
    sections package-wide (the partitions in order, ``PackageView.view_section``). Reads the
    document records of the partitions it covers: a publish step, never a query.
    ``published_here``: only the partitions this version published (a delta's base partitions
    have their base version's records, which its queries search too, docs/adr/0020: their
    records are not even read); never the sections a delta tombstones."""
    if not package.has_vectors:
        return []
    dead = tombstoned_sections(package)
    records = []
    for partition, first in _with_offsets(package):
        if published_here and not package.manifest.published_here(partition.key):
            continue
        assert partition.vectors is not None
        sections = (
            (doc, section) for doc in await partition.records.read_all() for section in doc.sections
        )
        for local, (doc, section) in enumerate(sections):
            if first + local in dead:
                continue
            records.append(
                VectorRecord(
                    id=vector_id(package.version, first + local),
                    values=partition.vectors.row(local),
                    namespace=namespace_for(doc.tenant),
                    metadata={
                        "version": package.version,
                        "doc": doc.semantic_id,
                        "section": section.section_id,
                        "trust": doc.trust,
                        "deprecated": doc.deprecated,
                    },
                )
            )
    return records


def tombstoned_sections(package: KnowledgePackage) -> set[int]:
    """Package-wide numbers of the sections a delta tombstones (docs/adr/0020): no store of
    the version holds their vectors."""
    firsts = {partition.key: first for partition, first in _with_offsets(package)}
    by_key = {partition.key: partition for partition in package.partitions}
    dead: set[int] = set()
    for partition in package.partitions:
        if partition.amendments is None or partition.entry.amends is None:
            continue
        base = by_key[partition.entry.amends]
        first = base.columns.first
        for doc in partition.amendments.tombstones:
            start = firsts[base.key]
            dead.update(range(start + first[doc], start + first[doc + 1]))
    return dead


def _with_offsets(package: KnowledgePackage) -> list[tuple[Partition, int]]:
    """Each partition with the package-wide number of its first section (manifest order)."""
    found = []
    start = 0
    for partition in package.partitions:
        found.append((partition, start))
        start += partition.section_count
    return found
