"""What one publish run did, for the operator: steps run and skipped, blobs sent and reused.

Why apart from the run (``ops.publish``): the report is what ``kr publish``, ``kr activate`` and
the benchmarks print and compare; it carries no port and no step logic, only counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["PublishReport"]


@dataclass
class PublishReport:
    """What one run did: steps run now, steps skipped as already done, the activation."""

    version: str
    target: str
    steps: list[str]
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    activated: bool = False
    previous_version: str | None = None
    vectors_upserted: int = 0
    vectors_skipped: int = 0  # the package has vectors but the target has no vector index
    blobs_uploaded: int = 0  # in this run
    bytes_uploaded: int = 0
    blobs_reused: int = 0  # content-named files the target already held: not sent
    bytes_reused: int = 0
    base_blobs: int = 0  # a delta's files its base published: neither sent nor asked for
    bases: list[str] = field(default_factory=list)

    def blob_summary(self) -> str:
        """``blobs: 12 uploaded (340.1 KiB), 3,410 already there (51.2 MiB)`` (this run), and
        for a delta version ``, 11,564 of its base kv-…``."""
        found = (
            f"blobs: {self.blobs_uploaded:,} uploaded ({_size(self.bytes_uploaded)}), "
            f"{self.blobs_reused:,} already there ({_size(self.bytes_reused)})"
        )
        if self.base_blobs:
            found += f", {self.base_blobs:,} of its base {', '.join(self.bases)}"
        return found

    @property
    def nothing_to_do(self) -> bool:
        return not self.ran


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
