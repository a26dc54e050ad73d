"""The question log: one row per served question with how it went, for the content-gaps report.

Why a table beside ``query_log``: that one counts requests per hour for cache warming, one row
per (request, hour); a content gap needs each question's own outcome, time and caller (was it
asked again, in other words, a minute after its answer?). So every served question becomes one
``question_log`` row (migrations/d1/0005): its tenant (the credential's), a hash of its caller
and conversation, the question redacted (:mod:`router.ops.redaction`) or nothing but its terms
(``LogPolicy.store = "terms"``), the analysed terms, the UI context, the outcome (answer,
evidence, nothing: docs/adr/0022), the confidence level, the router's reason, the nearest
sections with their scores and the knowledge version. Rows older than
``LogPolicy.retention_days`` are deleted by the Worker's scheduled handler and by ``kr gc``.
Pure Python: it runs in the Worker.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from router.contract import QueryRequest, QueryResponse
from router.errors import ConfigError
from router.ops.redaction import redact, scrub_terms

__all__ = [
    "ALL_TENANTS",
    "CONTEXT_FIELDS",
    "DEFAULT_LOG_RETENTION_DAYS",
    "LOG_STORES",
    "NEAREST_KEPT",
    "LogPolicy",
    "LoggedQuestion",
    "Nearest",
    "Outcome",
    "caller_hash",
    "iso",
    "log_policy_from",
    "outcome_of",
    "parse_when",
    "question_of",
    "question_params",
    "row_to_question",
]

DEFAULT_LOG_RETENTION_DAYS = 30.0
"""Days a logged question (and a query-log hour) is kept: a month of gaps to look back on."""
MAX_LOG_RETENTION_DAYS = 3660.0
LOG_STORES = ("redacted", "terms")
"""``redacted``: the question with personal data replaced; ``terms``: only its analysed terms."""
NEAREST_KEPT = 3
"""Nearest sections kept per question (their ids and fused scores)."""
CONTEXT_FIELDS = ("page", "tab", "focus", "date")
"""Request fields kept with a question, so it can be asked again where it was asked."""
ALL_TENANTS = "*"
"""The scope of an operator (the admin token, ``kr gaps``): every tenant's and anonymous rows.
No tenant can be named ``*`` (``contract._CONTEXT_ID``)."""

Outcome = Literal["answer", "evidence", "nothing"]
LogStore = Literal["redacted", "terms"]


@dataclass(frozen=True)
class LogPolicy:
    """What the logs keep, and for how long (``KR_LOG_STORE``, ``KR_LOG_RETENTION_DAYS``)."""

    store: LogStore = "redacted"
    retention_days: float = DEFAULT_LOG_RETENTION_DAYS

    def __post_init__(self) -> None:
        if self.store not in LOG_STORES:
            raise ConfigError(f"KR_LOG_STORE must be one of {', '.join(LOG_STORES)}")
        if not 0 < self.retention_days <= MAX_LOG_RETENTION_DAYS:
            raise ConfigError(
                f"KR_LOG_RETENTION_DAYS must be within 0..{MAX_LOG_RETENTION_DAYS:.0f} (not 0)"
            )

    @property
    def retention_s(self) -> float:
        return self.retention_days * 86400.0


def log_policy_from(get: Any, default: LogPolicy | None = None) -> LogPolicy:
    """``KR_LOG_STORE`` and ``KR_LOG_RETENTION_DAYS`` through ``get(name) -> str | None``."""
    base = default or LogPolicy()
    store = (get("KR_LOG_STORE") or "").strip().lower() or base.store
    raw = (get("KR_LOG_RETENTION_DAYS") or "").strip()
    try:
        days = float(raw) if raw else base.retention_days
    except ValueError as exc:
        raise ConfigError(f"KR_LOG_RETENTION_DAYS must be a number, got {raw!r}") from exc
    return LogPolicy(store=store, retention_days=days)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Nearest:
    """A section the router found nearest to a question, with its fused score."""

    doc_id: str
    section_id: str
    score: float


@dataclass(frozen=True)
class LoggedQuestion:
    """One served question as ``question_log`` keeps it (``id`` None until stored)."""

    at: float
    tenant: str | None
    caller: str | None
    question: str | None
    terms: tuple[str, ...]
    outcome: Outcome
    level: str
    reason: str | None = None
    nearest: tuple[Nearest, ...] = ()
    context: Mapping[str, str] = field(default_factory=dict)
    knowledge_version: str | None = None
    id: int | None = None

    @property
    def text(self) -> str:
        """The question as stored, or its terms when only they were kept."""
        return self.question if self.question is not None else " ".join(self.terms)

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": iso(self.at),
            "tenant": self.tenant,
            "question": self.question,
            "terms": list(self.terms),
            "outcome": self.outcome,
            "level": self.level,
            "reason": self.reason,
            "nearest": [vars(n) for n in self.nearest],
            "context": dict(self.context),
            "knowledge_version": self.knowledge_version,
        }


def outcome_of(response: QueryResponse) -> Outcome:
    """answer; evidence (declined, candidates given back); nothing (declined, no result)."""
    if not response.abstained:
        return "answer"
    return "evidence" if response.results else "nothing"


def caller_hash(caller: str | None, conversation: str | None = None) -> str | None:
    """Who asked, as a hash: the same caller in the same conversation gets the same value
    (reformulations are found by it), and the log never holds a key id or an address."""
    if caller is None and conversation is None:
        return None
    raw = f"{caller or ''}\x00{conversation or ''}"
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:16]


def question_of(
    request: QueryRequest,
    response: QueryResponse,
    at: float,
    caller: str | None = None,
    policy: LogPolicy | None = None,
) -> LoggedQuestion:
    """The ``question_log`` row of one served question, redacted as ``policy`` says."""
    policy = policy or LogPolicy()
    stored = None if policy.store == "terms" else redact(request.query)
    terms = tuple(scrub_terms(response.analysis.terms, request.query))
    context = {
        name: str(value) for name in CONTEXT_FIELDS if (value := getattr(request, name)) is not None
    }
    level = response.confidence_level
    reason = response.abstention_reason
    if reason is None and level == "LOW":
        reason = "answered with LOW confidence"
    return LoggedQuestion(
        at=at,
        tenant=request.tenant,
        caller=caller_hash(caller, request.conversation_id),
        question=stored,
        terms=terms,
        outcome=outcome_of(response),
        level=level,
        reason=reason,
        nearest=tuple(
            Nearest(r.doc_id, r.section_id, round(r.final_score, 4))
            for r in response.results[:NEAREST_KEPT]
        ),
        context=context,
        knowledge_version=response.knowledge_version or None,
    )


def question_params(question: LoggedQuestion) -> list[Any]:
    """Parameters of ``sql.QUESTION_LOG_RECORD`` (D1 and SQLite alike)."""
    nearest = [[n.doc_id, n.section_id, n.score] for n in question.nearest]
    return [
        question.at,
        question.tenant,
        question.caller,
        question.question,
        " ".join(question.terms),
        json.dumps(dict(question.context), ensure_ascii=False, sort_keys=True),
        question.outcome,
        question.level,
        question.reason,
        json.dumps(nearest, ensure_ascii=False),
        question.knowledge_version,
    ]


def row_to_question(row: Mapping[str, Any]) -> LoggedQuestion:
    """A ``question_log`` row as a :class:`LoggedQuestion` (a damaged JSON column reads empty)."""
    return LoggedQuestion(
        id=int(row["id"]),
        at=float(row["at"]),
        tenant=row.get("tenant"),
        caller=row.get("caller"),
        question=row.get("question"),
        terms=tuple(str(row.get("terms") or "").split()),
        outcome=row.get("outcome") or "nothing",
        level=str(row.get("level") or "NONE"),
        reason=row.get("reason"),
        nearest=tuple(
            Nearest(str(n[0]), str(n[1]), float(n[2]))
            for n in _json(row.get("nearest"), [])
            if isinstance(n, list) and len(n) == 3
        ),
        context={str(k): str(v) for k, v in _json(row.get("context"), {}).items()},
        knowledge_version=row.get("knowledge_version"),
    )


def _json(raw: Any, empty: Any) -> Any:
    if not isinstance(raw, str):
        return empty
    try:
        value = json.loads(raw)
    except ValueError:
        return empty
    return value if isinstance(value, type(empty)) else empty


def iso(at: float) -> str:
    """Unix time as an ISO 8601 UTC timestamp (seconds)."""
    return dt.datetime.fromtimestamp(at, dt.UTC).isoformat(timespec="seconds")


_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)\s*([dhm])$")
_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0}


def parse_when(text: str, now: float) -> float:
    """A moment for ``--since``/``--until`` and ``?since=``: ``YYYY-MM-DD`` (midnight UTC), an
    ISO 8601 timestamp (UTC unless it says otherwise), unix seconds, or a span before ``now``
    (``7d``, ``24h``, ``30m``). Raises ``ValueError`` otherwise."""
    raw = text.strip()
    relative = _RELATIVE.match(raw)
    if relative:
        return now - float(relative.group(1)) * _UNITS[relative.group(2)]
    try:
        return float(raw)
    except ValueError:
        pass
    moment = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()
