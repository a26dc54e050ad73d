"""A version's D1 rows: its partitions' catalogs in package-wide numbering, as table rows.

Why apart from the run (``ops.publish``): the rows step records them, and tests and benchmarks
derive them from a package without publishing it; both read the same records the package holds.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from router.package.format.records import iter_records_in_files, records_in_files
from router.package.version.manifest import Manifest

__all__ = ["catalog_rows", "package_catalog", "streamed_rows"]


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
    documents = [_document_row(index, doc) for index, doc in enumerate(catalog["documents"])]
    sections = [
        _section_row(index, section["doc"], section)
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


class _Rows:
    """One table's rows, produced again on each iteration from the package's records."""

    def __init__(self, produce: Callable[[], Iterator[dict[str, Any]]]) -> None:
        self._produce = produce

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self._produce()


def streamed_rows(
    files: Mapping[str, bytes], manifest: Manifest
) -> dict[str, Iterable[dict[str, Any]]]:
    """``catalog_rows(package_catalog(files, manifest))``, row for row, but each table read
    from the records when it is iterated, one partition at a time: the whole catalog and its
    rows held at once were ≈ 0.3 GB at 100k sections, several at a million (``kr build``'s
    publish to the local state iterates each table once)."""

    def records() -> Iterator[tuple[str, int, str, dict[str, Any]]]:
        for entry in manifest.partitions:
            if not manifest.published_here(entry.key):
                continue  # a delta's base partition: its rows are its base version's
            for local, text in enumerate(iter_records_in_files(files, entry.key)):
                yield entry.key, local, text, json.loads(text)

    def documents() -> Iterator[dict[str, Any]]:
        for index, (_, _, _, doc) in enumerate(records()):
            yield _document_row(index, doc)

    def sections() -> Iterator[tuple[int, int, dict[str, Any]]]:
        number = 0
        for doc_index, (_, _, _, doc) in enumerate(records()):
            for section in doc["sections"]:
                yield number, doc_index, section
                number += 1

    def keywords() -> Iterator[dict[str, Any]]:
        for index, (_, _, _, doc) in enumerate(records()):
            yield from ({"doc_index": index, "keyword": k} for k in dict.fromkeys(doc["keywords"]))

    return {
        "documents": _Rows(documents),
        "sections": _Rows(lambda: (_section_row(i, d, s) for i, d, s in sections())),
        "links": _Rows(
            lambda: (
                {"section_index": index, "target": target, "label": label}
                for index, _, section in sections()
                for target, label in section["links"]
            )
        ),
        "keywords": _Rows(keywords),
        "records": _Rows(
            lambda: (
                {"partition_key": key, "doc_index": local, "record": text}
                for key, local, text, _ in records()
            )
        ),
    }


def _document_row(index: int, doc: Mapping[str, Any]) -> dict[str, Any]:
    return {
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


def _section_row(index: int, doc_index: int, section: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "section_index": index,
        "doc_index": doc_index,
        "section_id": section["id"],
        "heading": section["heading"],
        "level": section["level"],
        "flags": ",".join(section["flags"]),
    }
