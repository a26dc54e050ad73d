"""Cache warming: replay the most frequent recent queries so their answers are already cached.

Why: a newly activated version (or a cold KV) makes every popular question pay the full cascade
once per cache key. The Worker's cron trigger calls :func:`warm_cache`, which replays the most
used requests of the query log against the active version through the ordinary query path, so
the LRU of the isolate and the KV shared by every isolate hold their answers before users ask.
Sans-I/O: it talks to the service and the :class:`~router.ports.QueryLog` port only, and replays
are not recorded in the log again (warming must not feed its own statistics).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import ValidationError

from router.contract import QueryRequest
from router.errors import RouterError
from router.ports import QueryLog
from router.service import KnowledgeService

__all__ = [
    "DEFAULT_LOG_RETENTION_S",
    "DEFAULT_WARM_LIMIT",
    "DEFAULT_WARM_WINDOW_S",
    "WarmReport",
    "warm_cache",
]

DEFAULT_WARM_LIMIT = 50
"""Requests replayed per run (the cron runs every 15 minutes; each miss costs one cascade)."""
DEFAULT_WARM_WINDOW_S = 24 * 3600.0
"""How far back "recent" reaches when ranking requests by use."""
DEFAULT_LOG_RETENTION_S = 7 * 24 * 3600.0
"""Hours of the log older than this are deleted by each warming run."""
_MAX_ERRORS_REPORTED = 10


@dataclass
class WarmReport:
    """What one warming run did, for the cron log and the tests."""

    knowledge_version: str | None = None
    considered: int = 0  # requests read from the log
    filled: int = 0  # computed now and written to the cache
    already_cached: int = 0  # answered from the LRU or KV: nothing to do
    invalid: int = 0  # logged requests the current contract rejects
    failed: int = 0  # replays that raised a router error
    errors: list[str] = field(default_factory=list)
    skipped: str | None = None  # why nothing was replayed, when nothing was

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


async def warm_cache(
    service: KnowledgeService,
    log: QueryLog,
    limit: int = DEFAULT_WARM_LIMIT,
    *,
    window_s: float = DEFAULT_WARM_WINDOW_S,
    retention_s: float | None = DEFAULT_LOG_RETENTION_S,
    now: float | None = None,
    today: str | None = None,
) -> WarmReport:
    """Replay the ``limit`` most used requests of the last ``window_s`` seconds.

    ``now`` is unix time (default: the wall clock); ``today`` is passed to the cascade like a
    request's day. Failures of single replays are counted, never raised; a missing active
    version, cache or query log ends the run early with ``skipped`` set.
    """
    report = WarmReport()
    if service.cache is None:
        report.skipped = "no query cache configured"
        return report
    now = time.time() if now is None else now
    try:
        report.knowledge_version = (await service.package()).version
    except RouterError as exc:
        report.skipped = _describe(exc)
        return report
    try:
        if retention_s is not None:
            await log.prune(now - retention_s)
        entries = await log.frequent(limit, since=now - window_s)
    except Exception as exc:  # the log is a statistic: report, do not crash the cron
        report.skipped = f"query log unavailable: {_describe(exc)}"
        return report
    for entry in entries:
        report.considered += 1
        try:
            request = QueryRequest.model_validate(entry.request)
        except ValidationError:
            report.invalid += 1
            continue
        try:
            response = await service.query(request, today=today, record=False)
        except Exception as exc:  # one bad replay must not stop the others
            report.failed += 1
            if len(report.errors) < _MAX_ERRORS_REPORTED:
                report.errors.append(_describe(exc))
            continue
        if response.metadata.cache == "miss":
            report.filled += 1
        else:
            report.already_cached += 1
    return report


def _describe(exc: Exception) -> str:
    if isinstance(exc, RouterError):
        return f"{exc.code}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"
