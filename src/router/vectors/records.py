"""Section vectors as Vectorize records: ids, tenant namespaces and filterable metadata.

Why namespaces per tenant: Vectorize searches one namespace per query, so a tenant's query asks
its own namespace and the shared one and can never reach another tenant's vectors. The knowledge
version is in every record's metadata and every query's filter, so one version is served at a time.
"""

from __future__ import annotations

from router.knowledge.model import ALL_TENANTS
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
    sections package-wide (the partitions in order, ``PackageView.view_section``). Reads every
    document record: a publish step, never a query. ``published_here``: only the partitions
    this version published (a delta's base partitions have their base version's records,
    which its queries search too, docs/adr/0020); never the sections a delta tombstones."""
    if not package.has_vectors:
        return []
    catalog = await package.read_catalog()
    dead = tombstoned_sections(package)
    if published_here:
        dead |= _published_elsewhere(package)
    rows = [
        (partition, local)
        for partition in package.partitions
        for local in range(partition.section_count)
    ]
    records = []
    for index, ((partition, local), section) in enumerate(zip(rows, catalog.sections, strict=True)):
        if index in dead:
            continue
        doc = catalog.documents[catalog.section_doc[index]]
        assert partition.vectors is not None
        records.append(
            VectorRecord(
                id=vector_id(package.version, index),
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
    partitions = package.partitions
    firsts: dict[str, int] = {}
    total = 0
    for partition in partitions:
        firsts[partition.key] = total
        total += partition.section_count
    by_key = {partition.key: partition for partition in partitions}
    dead: set[int] = set()
    for partition in partitions:
        if partition.amendments is None or partition.entry.amends is None:
            continue
        base = by_key[partition.entry.amends]
        first = base.columns.first
        for doc in partition.amendments.tombstones:
            start = firsts[base.key]
            dead.update(range(start + first[doc], start + first[doc + 1]))
    return dead


def _published_elsewhere(package: KnowledgePackage) -> set[int]:
    """Package-wide numbers of the sections of partitions another version published."""
    found: set[int] = set()
    start = 0
    for partition in package.partitions:
        if package.manifest.partition_home(partition.key) != package.version:
            found.update(range(start, start + partition.section_count))
        start += partition.section_count
    return found
