"""A partition's resident files as one object: what an isolate reads when it loads a version.

Why one object (index format 3, docs/adr/0010): a partition has a dozen resident files (its
columns, vocabulary, directories and tables), and a knowledge base with twenty tenants has
twenty-one partitions. Read one by one, loading a version cost ≈ 250 R2 gets — each a
subrequest of the request that loads it (50 allowed on the free plan, six at a time), and most of
a cold isolate's first query. Bundled, it is one get per partition. The manifest lists the
bundles with their sha256; the lazily read files stay apart
(``router.package.version.content_names``).

    magic    b"KRPART01"           8 bytes
    header   uint32 H              4 bytes: the JSON table's byte length
    table    UTF-8 JSON            [[name, bytes], …] in the order of the data
    data     the files, concatenated
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import cast

from router.errors import PackageFormatError
from router.package.format.arrays import header_fields

__all__ = ["BUNDLE_NAME", "decode_bundle", "encode_bundle"]

BUNDLE_NAME = "partition.bin"
_MAGIC = b"KRPART01"
_HEADER = struct.Struct("<8sI")


def encode_bundle(files: Mapping[str, bytes]) -> bytes:
    """The bundle of ``files`` (names without the partition prefix), in name order."""
    names = sorted(files)
    table = json.dumps([[name, len(files[name])] for name in names], separators=(",", ":"))
    raw = table.encode("utf-8")
    return b"".join([_HEADER.pack(_MAGIC, len(raw)), raw, *(files[name] for name in names)])


def decode_bundle(blob: bytes, what: str) -> dict[str, bytes]:
    """The files of a bundle (``what`` names it in errors); a malformed one is refused.

    The files are zero-copy views of the bundle (typed as the bytes they stand for; every
    decoder reads them through the buffer protocol): copied out, a bundle of 15 MB would cost
    30 at once, and a wasm heap never gives back its peak."""
    (table_bytes,) = header_fields(blob, _HEADER, _MAGIC, what)
    start = _HEADER.size + table_bytes
    try:
        table = json.loads(bytes(blob[_HEADER.size : start]).decode("utf-8"))
        entries = [(str(name), int(size)) for name, size in table]
    except (UnicodeDecodeError, ValueError, TypeError) as exc:
        raise PackageFormatError(f"{what}: its table is malformed: {exc}") from exc
    if start + sum(size for _, size in entries) != len(blob) or any(s < 0 for _, s in entries):
        raise PackageFormatError(f"{what}: its table does not match its {len(blob)} bytes")
    view = memoryview(blob)
    files: dict[str, bytes] = {}
    offset = start
    for name, size in entries:
        files[name] = cast(bytes, view[offset : offset + size])
        offset += size
    return files
