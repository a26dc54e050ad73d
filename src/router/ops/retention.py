"""Retention of the logs: the queries and questions older than the policy's days are deleted.

Why a function of its own: the Worker's scheduled handler (``retention_from_env``) and
``kr gc`` (local state) run the same deletion, so a retention of N days means the same on both;
docs/security.md, "The query log". Sans-I/O: it talks to the two log ports only.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from router.ports import QueryLog, QuestionLog

__all__ = ["RetentionReport", "apply_retention"]


@dataclass
class RetentionReport:
    """What one run deleted (for the cron log, ``kr gc`` and the tests)."""

    retention_days: float
    before: float  # unix time: rows older than this went
    questions_deleted: int = 0
    query_hours_deleted: int = 0
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


async def apply_retention(
    query_log: QueryLog | None,
    question_log: QuestionLog | None,
    retention_days: float,
    *,
    now: float | None = None,
) -> RetentionReport:
    """Delete what is older than ``retention_days`` before ``now``; a failing log is reported
    in ``error``, never raised (the cron goes on to warm the cache)."""
    now = time.time() if now is None else now
    report = RetentionReport(retention_days, now - retention_days * 86400.0)
    try:
        if question_log is not None:
            report.questions_deleted = await question_log.prune(report.before)
        if query_log is not None:
            report.query_hours_deleted = int(await query_log.prune(report.before) or 0)
    except Exception as exc:  # the log is a statistic: report, do not crash the cron
        report.error = f"{type(exc).__name__}: {exc}"
    return report
