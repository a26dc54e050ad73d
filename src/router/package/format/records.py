"""Encoder and decoder of the document records: one canonical JSON object per document (its
fields and its sections', not their texts), packed in document order into chunk files of about
``RECORD_CHUNK_BYTES`` with the layout of the section texts (``records.bin`` and
``records-<sha16>.bin``, ``router.package.format.texts``); read per query by
``router.package.stores.records`` (docs/index-format.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from router.errors import PackageFormatError
from router.knowledge.model import Document, Link, Section
from router.package.format.bundle import BUNDLE_NAME, decode_bundle
from router.package.format.texts import decode_text_index, encode_texts
from router.package.version.partitions import partition_file

__all__ = [
    "RECORDS_INDEX_NAME",
    "RECORDS_STEM",
    "RECORD_CHUNK_BYTES",
    "decode_record",
    "encode_records",
    "iter_records_in_files",
    "record_of",
    "records_in_files",
]

RECORDS_STEM = "records"
RECORDS_INDEX_NAME = f"{RECORDS_STEM}.bin"
RECORD_CHUNK_BYTES = 4 * 1024
"""Target size of a record chunk: a response needs a few dozen records scattered over the
knowledge base, about one chunk each, so small chunks keep its bytes low (≈ 4 KiB a record
read instead of 16) at the same number of reads."""


def record_of(doc: Document, flags: Sequence[Sequence[str]], metadata: Any) -> dict[str, Any]:
    """The record of one document: its fields and its sections' (not their texts);
    ``flags[i]`` are the flags of its section ``i``, ``metadata`` its JSON-safe metadata."""
    return {
        "id": doc.semantic_id,
        "title": doc.title,
        "path": doc.path,
        "description": doc.description,
        "keywords": doc.keywords,
        "aliases": doc.aliases,
        "tenant": doc.tenant,
        "trust": doc.trust,
        "status": doc.status,
        "version": doc.version,
        "created_at": doc.created_at,
        "updated_at": doc.updated_at,
        "valid_from": doc.valid_from,
        "valid_until": doc.valid_until,
        "scope": doc.scope,
        "facts": doc.facts,
        "metadata": metadata,
        "flags": doc.flags,
        "sections": [
            {
                "id": section.section_id,
                "heading": section.heading,
                "level": section.level,
                "line": section.line,
                "explicit": section.explicit_id,
                "links": [[link.target, link.label] for link in section.links],
                "flags": list(section_flags),
            }
            for section, section_flags in zip(doc.sections, flags, strict=True)
        ],
    }


def encode_records(records: Iterable[Mapping[str, Any]]) -> dict[str, bytes]:
    """``records.bin`` and its chunk files, one canonical JSON item per document (sorted keys,
    so equal content gives equal bytes), in order."""
    items = (
        json.dumps(r, ensure_ascii=False, sort_keys=True, separators=(",", ":")) for r in records
    )
    return encode_texts(items, RECORD_CHUNK_BYTES, RECORDS_STEM)


def decode_record(item: str) -> Document:
    """A ``Document`` (section texts empty: they are read apart) from its record."""
    try:
        data = json.loads(item)
        sections = [
            Section(
                section_id=s["id"],
                heading=s["heading"],
                level=s["level"],
                text="",
                line=s["line"],
                explicit_id=s["explicit"],
                links=[Link(s["id"], target, label, s["line"]) for target, label in s["links"]],
                flags=list(s["flags"]),
            )
            for s in data["sections"]
        ]
        return Document(
            semantic_id=data["id"],
            title=data["title"],
            path=data["path"],
            description=data["description"],
            keywords=data["keywords"],
            aliases=data["aliases"],
            tenant=data["tenant"],
            trust=data["trust"],
            status=data["status"],
            version=data["version"],
            created_at=data["created_at"],
            updated_at=data["updated_at"],
            valid_from=data["valid_from"],
            valid_until=data["valid_until"],
            scope=data["scope"],
            facts=data["facts"],
            metadata=data["metadata"],
            sections=sections,
            flags=list(data.get("flags", [])),  # packages before issue 12 have none
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise PackageFormatError(f"a document record is malformed: {exc!r}") from exc


def records_in_files(files: Mapping[str, bytes], partition: str) -> list[str]:
    """Every record of one partition, as its JSON text, from a package's files (publish)."""
    return list(iter_records_in_files(files, partition))


def iter_records_in_files(files: Mapping[str, bytes], partition: str) -> Iterator[str]:
    """``records_in_files``, one chunk read at a time (a large publish's rows)."""
    bundle_name = partition_file(partition, BUNDLE_NAME)
    resident = decode_bundle(files[bundle_name], bundle_name)
    index = decode_text_index(resident[RECORDS_INDEX_NAME], RECORDS_STEM)
    for chunk, name in enumerate(index.chunk_names()):
        try:
            yield from index.chunk_texts(chunk, files[partition_file(partition, name)])
        except UnicodeDecodeError as exc:
            raise PackageFormatError(f"{partition}: a record of {name} is malformed") from exc
