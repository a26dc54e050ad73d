"""A version's D1 rows: its partitions' catalogs in package-wide numbering, as table rows.

Why apart from the run (``ops.publish``): the rows step records them, and tests and benchmarks
derive them from a package without publishing it; both read the same records the package holds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from router.package.format.records import records_in_files
from router.package.version.manifest import Manifest

__all__ = ["catalog_rows", "package_catalog"]


def package_catalog(files: Mapping[str, bytes], manifest: Manifest) -> dict[str, Any]:
    """The partitions' catalogs as one, in package-wide numbering (the partitions in order).
    A delta version (docs/adr/0020) has rows for its delta partitions only: its base partitions'
    rows are their base version's (``Manifest.partition_home``), (the documents it
    tombstones among them are hidden by the filters before any row is read)."""
    documents: list[dict[str, Any]] = []
    sections: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    for entry in manifest.partitions:
        if not manifest.published_here(entry.key):
            continue  # a delta's base partition: its rows are its base version's
        for local, text in enumerate(records_in_files(files, entry.key)):
            record = json.loads(text)
            sections += [{**s, "doc": len(documents)} for s in record["sections"]]
            documents.append(record)
            records.append({"partition_key": entry.key, "doc_index": local, "record": text})
    return {"documents": documents, "sections": sections, "records": records}


def catalog_rows(catalog: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Rows for the D1 tables, derived from the package catalog."""
    documents = [
        {
            "doc_index": index,
            "semantic_id": doc["id"],
            "tenant": doc["tenant"],
            "title": doc["title"],
            "path": doc["path"],
            "trust": doc["trust"],
            "status": doc["status"],
            "doc_version": doc["version"],
            "valid_from": doc["valid_from"],
            "valid_until": doc["valid_until"],
            "facts": json.dumps(doc["facts"], ensure_ascii=False, sort_keys=True),
        }
        for index, doc in enumerate(catalog["documents"])
    ]
    sections = [
        {
            "section_index": index,
            "doc_index": section["doc"],
            "section_id": section["id"],
            "heading": section["heading"],
            "level": section["level"],
            "flags": ",".join(section["flags"]),
        }
        for index, section in enumerate(catalog["sections"])
    ]
    links = [
        {"section_index": index, "target": target, "label": label}
        for index, section in enumerate(catalog["sections"])
        for target, label in section["links"]
    ]
    keywords = [
        {"doc_index": index, "keyword": keyword}
        for index, doc in enumerate(catalog["documents"])
        for keyword in dict.fromkeys(doc["keywords"])
    ]
    return {
        "documents": documents,
        "sections": sections,
        "links": links,
        "keywords": keywords,
        "records": list(catalog.get("records", [])),
    }
