"""The D1 rows a publish streams from the records, table by table, are the catalog's rows, and
the statements made from them one at a time are ``version_statements``'."""

from __future__ import annotations

import pytest

from router.compile.build import build_knowledge
from router.ops.publish_rows import catalog_rows, package_catalog, streamed_rows
from router.package.version.manifest import MANIFEST_NAME, Manifest
from router.sql import iter_version_statements, version_statements
from tests.common import KNOWLEDGE


@pytest.mark.parametrize("max_parameters", [20, 12])
def test_streamed_rows_and_statements_are_the_catalogs(max_parameters: int) -> None:
    files = build_knowledge(KNOWLEDGE).package.files()
    manifest_bytes = files[MANIFEST_NAME]
    manifest = Manifest.from_bytes(manifest_bytes)
    expected = catalog_rows(package_catalog(files, manifest))
    streamed = streamed_rows(files, manifest)
    assert {table: list(rows) for table, rows in streamed.items()} == expected
    assert {table: list(rows) for table, rows in streamed.items()} == expected  # again
    version = manifest.knowledge_version
    statements = list(iter_version_statements(version, manifest_bytes, streamed, max_parameters))
    assert statements == version_statements(version, manifest_bytes, expected, max_parameters)
    assert len(expected["sections"]) > 64 * (max_parameters // 7)  # runs of rows are cut
