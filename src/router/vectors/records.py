"""Section vectors as Vectorize records: ids, tenant namespaces and filterable metadata.

Why namespaces per tenant: Vectorize searches one namespace per query, so a tenant's query asks
its own namespace and the shared one and can never reach another tenant's vectors. The knowledge
version is in every record's metadata and every query's filter, so one version is served at a time.
"""

from __future__ import annotations

from router.knowledge.model import ALL_TENANTS
from router.package.reader import KnowledgePackage
from router.ports import VectorRecord

__all__ = ["SHARED_NAMESPACE", "namespace_for", "query_namespaces", "section_records", "vector_id"]

SHARED_NAMESPACE = "shared"


def namespace_for(tenant: str) -> str:
    return SHARED_NAMESPACE if tenant == ALL_TENANTS else f"t:{tenant}"


def query_namespaces(tenant: str | None) -> list[str]:
    """Namespaces a query may search: the shared one plus the asking tenant's."""
    return [SHARED_NAMESPACE] + ([namespace_for(tenant)] if tenant else [])


def vector_id(version: str, section: int) -> str:
    """``<version>:<section index>`` — short (Vectorize ids are ≤ 64 bytes) and version-scoped."""
    return f"{version}:{section}"


async def section_records(package: KnowledgePackage) -> list[VectorRecord]:
    """Every section vector of the package with its namespace and metadata; ids number the
    sections package-wide (the partitions in order, ``PackageView.view_section``). Reads every
    document record: a publish step, never a query."""
    if not package.has_vectors:
        return []
    catalog = await package.read_catalog()
    rows = [
        (partition, local)
        for partition in package.partitions
        for local in range(partition.section_count)
    ]
    records = []
    for index, ((partition, local), section) in enumerate(zip(rows, catalog.sections, strict=True)):
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
