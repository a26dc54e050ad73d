"""Content gaps: the questions the knowledge did not answer well, grouped by topic.

Why from the question log: every served question is logged with its outcome
(:mod:`router.ops.questions`), so the questions the router declined, answered with LOW
confidence, or answered and then saw asked again in other words are the knowledge base's
to-do list. ``kr gaps``, ``GET /v1/gaps`` and the playground's ``/gaps`` show the same report.

A question is a gap when:
- it was declined (outcome ``evidence`` or ``nothing``: docs/adr/0022);
- it was answered with LOW confidence;
- it was answered and the same caller, in the same conversation, asked again within
  ``REFORMULATION_WINDOW_S`` with other words sharing a term ("reformulated": the answer did not
  serve).

Gaps are grouped per tenant by their analysed terms: two questions join when the Jaccard
similarity of their term sets is at least ``MIN_SIMILARITY``, or when they share at least two
terms making ``MIN_OVERLAP`` of the shorter set ("refeitório da fábrica abre que horas?" and "Qual
o horário do refeitório da fábrica?" share 2 of 3) (single linkage; identical term
sets first collapse into one, and a term shared by more than ``MAX_TERM_FANOUT`` distinct sets
is compared against the first ones only, so a long log stays near-linear). Each group has its
count, first and last seen, an example question, the router's most common reason, and the
sections nearest to it (the best fused score each reached, and how many questions found it).
Pure Python: it runs in the Worker.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from router.ops.questions import LoggedQuestion, iso
from router.ports import QuestionLog
from router.stages.normalizer import normalize_query

__all__ = [
    "DEFAULT_GAP_PERIOD_S",
    "MAX_TERM_FANOUT",
    "MIN_OVERLAP",
    "MIN_SIMILARITY",
    "READ_PAGE",
    "REFORMULATED",
    "REFORMULATION_WINDOW_S",
    "GapGroup",
    "GapReport",
    "find_gaps",
    "gap_reason",
    "gap_report",
    "read_questions",
]

REFORMULATION_WINDOW_S = 120.0
"""An answer followed within this by the same caller's question in other words was no answer."""
MIN_SIMILARITY = 0.5
"""Jaccard similarity of two questions' analysed terms at which they are one topic."""
MIN_OVERLAP = 0.6
"""Share of the shorter term set two questions with two terms or more in common must share."""
MAX_TERM_FANOUT = 200
"""Distinct term sets one term links at most (bounds the pairs compared on a long log)."""
READ_PAGE = 500
"""Questions read from the log per round trip."""
DEFAULT_GAP_PERIOD_S = 7 * 86400.0
"""The period a report covers when none is given: the last week."""
EXAMPLES_KEPT = 20
"""Questions of a group listed in the report (the count covers all of them)."""
NEAREST_SHOWN = 3
REFORMULATED = "asked again in other words right after the answer"


@dataclass
class GapGroup:
    """Similar unanswered questions of one tenant (``tenant`` None: anonymous callers)."""

    id: str
    tenant: str | None
    questions: list[LoggedQuestion]
    reasons: list[str]  # one per question, in the same order

    @property
    def count(self) -> int:
        return len(self.questions)

    @property
    def first_seen(self) -> float:
        return min(q.at for q in self.questions)

    @property
    def last_seen(self) -> float:
        return max(q.at for q in self.questions)

    @property
    def example(self) -> LoggedQuestion:
        """The group's most asked wording (the latest on a tie)."""
        counts = Counter(_wording(q) for q in self.questions)
        return max(self.questions, key=lambda q: (counts[_wording(q)], q.at, q.id or 0))

    @property
    def reason(self) -> str:
        return Counter(self.reasons).most_common(1)[0][0]

    @property
    def terms(self) -> list[str]:
        """The group's terms, the most shared first."""
        counts = Counter(t for q in self.questions for t in set(q.terms))
        return [t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]

    def nearest(self) -> list[dict[str, Any]]:
        """The sections nearest to the group: best score reached, and by how many questions."""
        best: dict[tuple[str, str], float] = {}
        found: Counter[tuple[str, str]] = Counter()
        for question in self.questions:
            for near in question.nearest:
                key = (near.doc_id, near.section_id)
                best[key] = max(best.get(key, near.score), near.score)
                found[key] += 1
        ranked = sorted(best, key=lambda k: (-found[k], -best[k], k))[:NEAREST_SHOWN]
        return [
            {"doc_id": d, "section_id": s, "score": best[(d, s)], "questions": found[(d, s)]}
            for d, s in ranked
        ]

    def as_json(self) -> dict[str, Any]:
        example = self.example
        outcomes = Counter(q.outcome for q in self.questions)
        listed = sorted(zip(self.questions, self.reasons, strict=True), key=lambda qr: -qr[0].at)
        return {
            "id": self.id,
            "tenant": self.tenant,
            "count": self.count,
            "first_seen": iso(self.first_seen),
            "last_seen": iso(self.last_seen),
            "example": example.text,
            "example_id": example.id,
            "example_context": dict(example.context),
            "terms": self.terms[:8],
            "reason": self.reason,
            "reasons": dict(Counter(self.reasons)),
            "outcomes": dict(outcomes),
            "nearest": self.nearest(),
            "questions": [{**q.as_json(), "gap": reason} for q, reason in listed[:EXAMPLES_KEPT]],
        }


@dataclass
class GapReport:
    """What ``kr gaps`` and ``GET /v1/gaps`` answer."""

    since: float
    until: float
    scope: str  # "*" (every tenant) or a tenant's name
    questions: int  # questions of the period read
    groups: list[GapGroup] = field(default_factory=list)

    @property
    def gaps(self) -> int:
        return sum(g.count for g in self.groups)

    def as_json(self, limit: int | None = None) -> dict[str, Any]:
        shown = self.groups if limit is None else self.groups[:limit]
        return {
            "since": iso(self.since),
            "until": iso(self.until),
            "scope": "all" if self.scope == "*" else self.scope,
            "questions": self.questions,
            "gaps": self.gaps,
            "group_count": len(self.groups),
            "groups": [g.as_json() for g in shown],
        }


def _wording(question: LoggedQuestion) -> str:
    return normalize_query(question.text).text


def gap_reason(question: LoggedQuestion, following: LoggedQuestion | None) -> str | None:
    """Why ``question`` is a gap, or None when it is not; ``following`` is the same caller's
    next question, if any."""
    if question.outcome != "answer":
        return question.reason or "declined"
    if question.level == "LOW":
        return question.reason or "answered with LOW confidence"
    if (
        following is not None
        and question.caller is not None
        and following.at - question.at <= REFORMULATION_WINDOW_S
        and _wording(following) != _wording(question)
        and set(following.terms) & set(question.terms)
    ):
        return REFORMULATED
    return None


def find_gaps(questions: Sequence[LoggedQuestion]) -> list[GapGroup]:
    """The gap questions among ``questions``, grouped, the largest group first."""
    following = _next_by_caller(questions)
    gaps: list[tuple[LoggedQuestion, str]] = []
    for index, question in enumerate(questions):
        reason = gap_reason(question, following.get(index))
        if reason is not None:
            gaps.append((question, reason))
    groups = [_group(members) for members in _cluster(gaps)]
    return sorted(groups, key=lambda g: (-g.count, -g.last_seen, g.id))


def _next_by_caller(questions: Sequence[LoggedQuestion]) -> dict[int, LoggedQuestion]:
    """Index of each question → the same caller's next question (by time)."""
    by_caller: dict[str, list[int]] = {}
    for index, question in enumerate(questions):
        if question.caller is not None:
            by_caller.setdefault(question.caller, []).append(index)
    following: dict[int, LoggedQuestion] = {}
    for indices in by_caller.values():
        indices.sort(key=lambda i: (questions[i].at, questions[i].id or 0))
        for here, there in itertools.pairwise(indices):
            following[here] = questions[there]
    return following


def _cluster(
    gaps: Sequence[tuple[LoggedQuestion, str]],
) -> list[list[tuple[LoggedQuestion, str]]]:
    """Single-linkage clusters of the gaps by Jaccard similarity of their term sets, per tenant."""
    keys: dict[tuple[str | None, frozenset[str] | str], int] = {}
    members: list[list[tuple[LoggedQuestion, str]]] = []
    for gap in gaps:
        question = gap[0]
        terms: frozenset[str] | str = frozenset(question.terms) or _wording(question)
        key = (question.tenant, terms)
        if key not in keys:
            keys[key] = len(members)
            members.append([])
        members[keys[key]].append(gap)
    sets = list(keys)
    parent = list(range(len(sets)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    by_term: dict[tuple[str | None, str], list[int]] = {}
    for i, (tenant, terms) in enumerate(sets):
        if not isinstance(terms, frozenset):
            continue
        for term in sorted(terms):
            seen = by_term.setdefault((tenant, term), [])
            for j in seen:
                other = sets[j][1]
                assert isinstance(other, frozenset)
                if root(i) != root(j) and _similar(terms, other):
                    parent[root(i)] = root(j)
            if len(seen) < MAX_TERM_FANOUT:
                seen.append(i)
    clusters: dict[int, list[tuple[LoggedQuestion, str]]] = {}
    for i in range(len(sets)):
        clusters.setdefault(root(i), []).extend(members[i])
    return list(clusters.values())


def _similar(a: frozenset[str], b: frozenset[str]) -> bool:
    shared = len(a & b)
    if shared / len(a | b) >= MIN_SIMILARITY:
        return True
    return shared >= 2 and shared / min(len(a), len(b)) >= MIN_OVERLAP


def _group(members: list[tuple[LoggedQuestion, str]]) -> GapGroup:
    members.sort(key=lambda qr: (qr[0].at, qr[0].id or 0))
    first = min((q.id for q, _ in members if q.id is not None), default=None)
    if first is None:  # questions not read from a log (tests): named by their first wording
        digest = hashlib.sha256(_wording(members[0][0]).encode("utf-8")).hexdigest()[:8]
        group_id = f"g-{digest}"
    else:
        group_id = f"g{first}"
    return GapGroup(
        id=group_id,
        tenant=members[0][0].tenant,
        questions=[q for q, _ in members],
        reasons=[r for _, r in members],
    )


async def read_questions(
    log: QuestionLog,
    since: float,
    until: float,
    tenant: str,
    advance: Callable[[int], None] | None = None,
    page: int = READ_PAGE,
) -> list[LoggedQuestion]:
    """Every question of ``[since, until)`` in ``tenant``'s scope, read a page at a time;
    ``advance(n)`` is told of each page (a progress bar)."""
    found: list[LoggedQuestion] = []
    after = 0
    while True:
        batch = await log.read(since, until, tenant, after, page)
        found.extend(batch)
        if advance is not None and batch:
            advance(len(batch))
        if len(batch) < page:
            return found
        after = max(q.id or 0 for q in batch)


async def gap_report(
    log: QuestionLog,
    since: float | None = None,
    until: float | None = None,
    tenant: str = "*",
    *,
    now: float | None = None,
    advance: Callable[[int], None] | None = None,
) -> GapReport:
    """The content gaps of ``tenant``'s scope (``*``: everyone's) over ``[since, until)``
    (default: the last ``DEFAULT_GAP_PERIOD_S``)."""
    now = time.time() if now is None else now
    until = now + 1.0 if until is None else until  # the end is exclusive: now included
    since = until - DEFAULT_GAP_PERIOD_S if since is None else since
    questions = await read_questions(log, since, until, tenant, advance)
    return GapReport(since, until, tenant, len(questions), find_gaps(questions))
