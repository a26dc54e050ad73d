"""Recording served queries for cache warming: what is kept, how it is keyed, when it is written.

Why a recorder in front of the :class:`~router.ports.QueryLog` port: a write to D1 costs a
network round trip, so the Worker counts queries in memory and writes them in one batch every few
queries or seconds (locally every query is written at once). Recording is best effort: a failure
to log is counted and logged, and never fails the query that was being served.

What is kept: only the request fields that shape the cached answer (see
:func:`router.stages.cache.cache_key`), so replaying a logged request lands on the same cache
entry. Requests asking for an LLM answer are not recorded: warming them would spend LLM calls.
Nor are questions the redaction changed (:mod:`router.ops.redaction`: a replay of
``[email]`` would fill a cache entry nobody asks for), nor any question when the policy keeps
terms only. With a :class:`~router.ports.QuestionLog`, each served question is also written
with its outcome (:mod:`router.ops.questions`), for the content-gaps report.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from router.contract import QueryRequest, QueryResponse
from router.ops.questions import LoggedQuestion, LogPolicy, question_of
from router.ops.redaction import redact
from router.ports import LoggedQuery, QueryLog, QuestionLog, SharedLogWriter
from router.stages.normalizer import normalize_query

__all__ = [
    "REPLAYED_FIELDS",
    "QueryRecorder",
    "hour_of",
    "logged_params",
    "logged_query",
    "replayable_fields",
    "request_key",
    "row_to_logged",
]

log = logging.getLogger(__name__)

REPLAYED_FIELDS = frozenset(
    {"query", "tenant", "page", "tab", "focus", "date", "top_k", "include_deprecated"}
)
"""QueryRequest fields that enter the query-cache key, hence the ones a replay needs."""

SECONDS_PER_HOUR = 3600


def hour_of(at: float) -> int:
    """The hour bucket (unix time // 3600) the log counts ``at`` in."""
    return int(at // SECONDS_PER_HOUR)


def logged_params(query: LoggedQuery) -> list[Any]:
    """Parameters of ``sql.QUERY_LOG_RECORD`` for one logged query (D1 and SQLite alike)."""
    request = json.dumps(query.request, ensure_ascii=False, sort_keys=True)
    return [query.key, hour_of(query.last_seen), request, query.hits, query.last_seen]


def replayable_fields(
    request: QueryRequest, policy: LogPolicy | None = None
) -> dict[str, Any] | None:
    """The JSON fields a replay of ``request`` needs, or None when it must not be recorded:
    an LLM request, a question holding personal data (redaction would change it), or any
    question under a terms-only policy."""
    if request.generate:
        return None
    if policy is not None and (policy.store == "terms" or redact(request.query) != request.query):
        return None
    return request.model_dump(mode="json", include=set(REPLAYED_FIELDS), exclude_defaults=True)


def request_key(fields: Mapping[str, Any]) -> str:
    """Identity of a request in the log: its fields with the query text normalised as the
    query-cache key normalises it, hashed.

    "O que é APR?" and "O que é  APR ?" share one cache entry, so they share one count.
    """
    identity = dict(fields)
    identity["query"] = normalize_query(str(fields.get("query", ""))).text
    canonical = json.dumps(identity, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def logged_query(
    request: QueryRequest, at: float, hits: int = 1, policy: LogPolicy | None = None
) -> LoggedQuery | None:
    """The log entry of one served request, or None when it is not recorded."""
    fields = replayable_fields(request, policy)
    if fields is None:
        return None
    return LoggedQuery(key=request_key(fields), request=fields, hits=hits, last_seen=at)


def row_to_logged(row: Mapping[str, Any]) -> LoggedQuery:
    """A ``query_log`` aggregate row (``QUERY_LOG_FREQUENT``) as a :class:`LoggedQuery`."""
    request = row["request"]
    return LoggedQuery(
        key=str(row["request_key"]),
        request=json.loads(request) if isinstance(request, str) else dict(request),
        hits=int(row["hits"]),
        last_seen=float(row["last_seen"]),
    )


class QueryRecorder:
    """Counts served queries in memory and writes them to a :class:`QueryLog` in batches, and
    each served question with its outcome to a :class:`QuestionLog` (``questions``) with them.

    A batch is written when ``flush_every`` queries are pending or ``flush_interval_s`` seconds
    (monotonic clock) have passed since the last write; ``flush_every=1`` writes every query.
    At most ``max_pending`` distinct requests wait in memory: beyond that new ones are dropped
    (the frequent ones are already there), and at most ``max_pending`` questions. ``policy``
    says what is stored (redacted text or terms only). Nothing here ever raises into the query
    path.
    """

    def __init__(
        self,
        log: QueryLog,
        *,
        questions: QuestionLog | None = None,
        policy: LogPolicy | None = None,
        flush_every: int = 1,
        flush_interval_s: float = 0.0,
        max_pending: int = 1000,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.log = log
        self.questions = questions
        self.policy = policy or LogPolicy()
        self.flush_every = max(1, flush_every)
        self.flush_interval_s = flush_interval_s
        self.max_pending = max_pending
        self.clock = clock
        self.wall_clock = wall_clock
        self.failures = 0
        self.dropped = 0
        self.written = 0
        self._pending: dict[str, LoggedQuery] = {}
        self._questions: list[LoggedQuestion] = []
        self._pending_hits = 0
        self._last_flush = clock()

    @property
    def pending(self) -> int:
        """Queries counted but not yet written."""
        return self._pending_hits

    @property
    def pending_questions(self) -> int:
        """Questions kept but not yet written."""
        return len(self._questions)

    async def record(
        self,
        request: QueryRequest,
        response: QueryResponse | None = None,
        caller: str | None = None,
    ) -> None:
        """Count one served request (and keep its question with ``response``); write the batch
        when it is due. Never raises."""
        try:
            now = self.wall_clock()
            counted = self._count(logged_query(request, now, policy=self.policy))
            kept = False
            if response is not None and self.questions is not None:
                if len(self._questions) < self.max_pending:
                    self._questions.append(question_of(request, response, now, caller, self.policy))
                    kept = True
                else:
                    self.dropped += 1
            if (counted or kept) and self._due():
                await self.flush()
        except Exception:  # logging must never fail a query
            self.failures += 1
            log.warning("could not record a served query", exc_info=True)

    def _count(self, entry: LoggedQuery | None) -> bool:
        """Add ``entry`` to the pending batch; False when it is not recorded or dropped."""
        if entry is None:
            return False
        known = self._pending.get(entry.key)
        if known is not None:
            entry = LoggedQuery(entry.key, known.request, known.hits + 1, entry.last_seen)
        elif len(self._pending) >= self.max_pending:
            self.dropped += 1
            return False
        self._pending[entry.key] = entry
        self._pending_hits += 1
        return True

    async def flush(self) -> int:
        """Write every pending query now; returns how many distinct requests were written.

        On failure the batch is dropped (counted in ``failures``): the log is a statistic, and
        retrying a failing backend on every query would only slow the queries down.
        """
        batch = list(self._pending.values())
        questions = self._questions
        self._pending.clear()
        self._questions = []
        self._pending_hits = 0
        self._last_flush = self.clock()
        try:
            await self._write(batch, questions)
        except Exception:
            self.failures += 1
            log.warning(
                "could not write %d logged queries and %d questions",
                len(batch),
                len(questions),
                exc_info=True,
            )
            return 0
        written = len(batch)
        self.written += written
        return written

    async def _write(self, batch: list[LoggedQuery], questions: list[LoggedQuestion]) -> None:
        """One batch when both logs share a database (D1: one round trip), else two writes."""
        if not questions or self.questions is None:
            if batch:
                await self.log.record(batch)
            return
        if isinstance(self.log, SharedLogWriter):
            await self.log.record_with_questions(batch, questions)
            return
        if batch:
            await self.log.record(batch)
        await self.questions.record(questions)

    def _due(self) -> bool:
        if max(self._pending_hits, len(self._questions)) >= self.flush_every:
            return True
        return (
            self.flush_interval_s > 0 and self.clock() - self._last_flush >= self.flush_interval_s
        )
