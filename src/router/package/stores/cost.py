"""What a read of the index cost: the one measure every store reports and the trace shows.

Why one type: keys, terms, edges, shards, records and texts are all read the same way — chunks
not held by the isolate, fetched concurrently — so one query's reads add up (``then``: one after
the other; ``alongside``: in the same round trip) whatever they read.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ReadCost"]


@dataclass(frozen=True)
class ReadCost:
    """What one read cost: the items looked up (keys, terms, sections, documents), the chunks
    fetched from the store (one round trip when fetched concurrently) and their bytes; chunks
    served from the isolate's cache cost nothing."""

    sections: int  # items looked up (named for the first store that reported it: texts)
    chunks_fetched: int
    bytes_fetched: int
    round_trips: int

    def then(self, other: ReadCost) -> ReadCost:
        """This read, then ``other``: counts and round trips add up."""
        return ReadCost(
            self.sections + other.sections,
            self.chunks_fetched + other.chunks_fetched,
            self.bytes_fetched + other.bytes_fetched,
            self.round_trips + other.round_trips,
        )

    def alongside(self, other: ReadCost) -> ReadCost:
        """Both reads, made concurrently: their counts add up, their round trips overlap."""
        return ReadCost(
            self.sections + other.sections,
            self.chunks_fetched + other.chunks_fetched,
            self.bytes_fetched + other.bytes_fetched,
            max(self.round_trips, other.round_trips),
        )
