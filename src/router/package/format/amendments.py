"""What a delta partition changes in the base partition it amends: tombstones and redirects.

Why (docs/adr/0020): an incremental build does not rewrite a base partition. The documents
changed since live again in a delta partition, and their old copies must vanish from every
stage: a tombstoned document is hidden like a deprecated one, before ranking (its postings,
exact keys, phrases and vectors stay in the base files and are filtered out). A wikilink of an
unchanged base document still points at the old copy of a changed one, so each old section is
redirected to the section of the new copy with the same id (else to the new copy's first
section), and the graph follows the redirect. The old copies' sections still count in the
base's document frequencies: ``dead`` says by how much, per posting block and term, so a query
subtracts them (and their sections from N) and scores as a full rebuild would.

``amends.bin`` (resident, in the delta's bundle)::

    offset 0   8 bytes   magic "KRAMND01"
    offset 8   uint32    D tombstones, R redirects, J bytes of JSON
               uint32[D]  the base partition's local document indices, ascending
               uint32[R]  old view sections (of tombstoned documents), ascending
               uint32[R]  the view section each one is redirected to
               J bytes    canonical JSON {block: {term: sections}}: the tombstoned sections
                          holding each term, per posting block (absent: not known)
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from struct import Struct

from router.errors import PackageFormatError
from router.package.format.arrays import header_fields, little_endian_bytes, little_endian_view

__all__ = ["AMENDMENTS_NAME", "Amendments", "decode_amendments", "encode_amendments"]

AMENDMENTS_NAME = "amends.bin"
_MAGIC = b"KRAMND01"
_HEADER = Struct("<8sIII")


@dataclass(frozen=True)
class Amendments:
    """A delta's tombstones (base-local document indices) and section redirects (view numbers)."""

    tombstones: Sequence[int]
    old_sections: Sequence[int]
    new_sections: Sequence[int]
    dead: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # block → term → df

    def redirect(self, section: int) -> int | None:
        """The view section an old (tombstoned) section now lives at, or None."""
        at = bisect_left(self.old_sections, section)
        if at < len(self.old_sections) and self.old_sections[at] == section:
            return int(self.new_sections[at])
        return None


def encode_amendments(
    tombstones: Sequence[int],
    redirects: Mapping[int, int],
    dead: Mapping[str, Mapping[str, int]] | None = None,
) -> bytes:
    """``amends.bin`` for ``tombstones`` (base-local document indices), ``redirects`` and the
    ``dead`` document frequencies of the tombstoned sections."""
    old = sorted(redirects)
    table = json.dumps(dead or {}, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    encoded = table.encode("utf-8")
    return b"".join(
        [
            _HEADER.pack(_MAGIC, len(tombstones), len(old), len(encoded)),
            little_endian_bytes("I", sorted(tombstones)),
            little_endian_bytes("I", old),
            little_endian_bytes("I", [redirects[s] for s in old]),
            encoded,
        ]
    )


def decode_amendments(blob: bytes, what: str) -> Amendments:
    """The amendments of ``blob``; a truncated or inconsistent one is refused."""
    tombstones, redirects, table = header_fields(blob, _HEADER, _MAGIC, what)
    numbers_end = _HEADER.size + 4 * (tombstones + 2 * redirects)
    if len(blob) != numbers_end + table:
        raise PackageFormatError(f"{what} is {len(blob)} bytes, expected {numbers_end + table}")
    view = memoryview(blob)[_HEADER.size : numbers_end]
    numbers = little_endian_view(view, "I")
    dead = _dead_table(bytes(blob[numbers_end:]), what)
    dead_docs = numbers[:tombstones]
    old = numbers[tombstones : tombstones + redirects]
    if any(a >= b for a, b in pairwise(dead_docs)) or any(a >= b for a, b in pairwise(old)):
        raise PackageFormatError(f"{what} is not sorted")
    return Amendments(dead_docs, old, numbers[tombstones + redirects :], dead)


def _dead_table(blob: bytes, what: str) -> dict[str, dict[str, int]]:
    try:
        table = json.loads(blob) if blob else {}
        return {
            str(block): {str(term): int(count) for term, count in terms.items()}
            for block, terms in table.items()
        }
    except (ValueError, AttributeError, TypeError) as exc:
        raise PackageFormatError(f"{what}: its document frequency table is malformed") from exc
