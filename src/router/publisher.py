"""Publishing a built package: blobs, then rows, then activation — activation last and atomic.

Why this order: artifacts are immutable and addressed by version, so writing them can never
disturb the version being served; the package is read back and verified before any reader can
see it; the single KV write of the active version is the switch, so a query sees the old version
or the new one, never a mix. Re-running a publish is harmless (idempotent).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from router.package.manifest import MANIFEST_NAME, Manifest
from router.package.reader import load_package
from router.ports import (
    ACTIVE_VERSION_KEY,
    PREVIOUS_VERSION_KEY,
    BlobStore,
    KeyValueStore,
    RelationalStore,
)
from router.service import package_key

__all__ = ["activate", "catalog_rows", "publish_package"]


async def publish_package(
    files: Mapping[str, bytes],
    blobs: BlobStore,
    kv: KeyValueStore,
    relational: RelationalStore | None = None,
    activate_now: bool = True,
) -> str:
    """Upload, verify, record and (optionally) activate a package; returns its version."""
    manifest = Manifest.from_bytes(files[MANIFEST_NAME])
    version = manifest.knowledge_version
    for name in sorted(files):
        await blobs.put(package_key(version, name), files[name])
    stored = {}
    for name in files:
        blob = await blobs.get(package_key(version, name))
        stored[name] = blob if blob is not None else b""
    load_package(stored[MANIFEST_NAME], stored.__getitem__)  # refuses a partial upload
    if relational is not None:
        catalog = json.loads(files["catalog.json"])
        await relational.record_version(version, files[MANIFEST_NAME], catalog_rows(catalog))
    if activate_now:
        await activate(kv, version)
    return version


async def activate(kv: KeyValueStore, version: str) -> None:
    """Make ``version`` the one every new query reads; remember the previous one."""
    previous = await kv.get(ACTIVE_VERSION_KEY)
    if previous and previous != version:
        await kv.put(PREVIOUS_VERSION_KEY, previous)
    await kv.put(ACTIVE_VERSION_KEY, version)


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
    return {"documents": documents, "sections": sections, "links": links, "keywords": keywords}
