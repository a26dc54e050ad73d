"""Parsed documents kept on disk, pickled one after another, and read back one at a time.

Why: a million sections parse to ≈ 1.6 GB of Document, Section and Link objects, and a build
held them all from the parse to the end of the publish — a quarter of its peak. Every step of
the build reads the documents in order (a partition's, or all of them), so each pass unpickles
them one at a time from a temporary file instead (≈ 4 s a pass at 1M sections); what a pass
keeps of them is its own business. Only for builds that do not change their documents after
parsing nor key anything by ``id(doc)``: with section vectors or doc2query questions the build
keeps its list (``router.compile.build``).
"""

from __future__ import annotations

import pickle
import tempfile
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, overload

from router.knowledge.model import Document

__all__ = ["SpilledDocuments"]


class SpilledDocuments(Sequence[Document]):
    """A sequence of documents in a temporary file: ``append`` pickles one, indexing and
    iteration unpickle (a new object every time: never compare them by identity).
    ``select`` is a view of some of them, in the order given, on the same file."""

    def __init__(self, file: IO[bytes] | None = None, spans: array[int] | None = None) -> None:
        self._file = file if file is not None else tempfile.TemporaryFile(prefix="kr-documents-")  # noqa: SIM115 (lives with the sequence)
        self._spans = spans if spans is not None else array("Q")  # (start, end) per document
        self._end = self._file.seek(0, 2)

    def append(self, doc: Document) -> None:
        blob = pickle.dumps(doc, protocol=pickle.HIGHEST_PROTOCOL)
        self._file.seek(self._end)
        self._file.write(blob)
        self._spans.extend((self._end, self._end + len(blob)))
        self._end += len(blob)

    def __len__(self) -> int:
        return len(self._spans) // 2

    @overload
    def __getitem__(self, index: int) -> Document: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Document]: ...

    def __getitem__(self, index: int | slice) -> Document | Sequence[Document]:
        if isinstance(index, slice):
            return self.select(range(len(self))[index])
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        index %= len(self)
        return self._read(self._spans[2 * index], self._spans[2 * index + 1])

    def __iter__(self) -> Iterator[Document]:
        for index in range(len(self)):
            yield self._read(self._spans[2 * index], self._spans[2 * index + 1])

    def select(self, indices: Iterable[int]) -> SpilledDocuments:
        spans = array("Q")
        for index in indices:
            spans.extend(self._spans[2 * index : 2 * index + 2])
        return type(self)(self._file, spans)

    def _read(self, start: int, end: int) -> Document:
        self._file.seek(start)
        doc = pickle.loads(self._file.read(end - start))
        if not isinstance(doc, Document):
            raise TypeError(f"not a document at {start} of the spill file")
        return doc
