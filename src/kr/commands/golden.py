"""``kr golden add``: promote a logged question, or a gap group's questions, into the golden set.

Why: a question real users asked and the knowledge failed is the best regression test there is.
Once it is in ``eval/golden.jsonl`` with the document that now answers it (or ``abstain: true``
when the right answer is to decline), every later version meets it at the quality gate
(``kr build``, ``kr gate``, ``kr publish``): a version that loses it is held (docs/adr/0025).
The question keeps its tenant and UI context (page, tab, focus, date), as logged; a question
already in the set (same normalised text and context) is refused.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from kr.commands.gaps import moment
from kr.golden import (
    GOLDEN_CONTEXT,
    append_golden,
    golden_identity,
    golden_rows,
    next_golden_id,
)
from kr.local import local_state
from kr.packages import active_package
from kr.progress import say
from router.adapters.local.state import LocalState
from router.errors import DatasetError
from router.ops.gaps import gap_report
from router.ops.questions import ALL_TENANTS, LoggedQuestion
from router.stages.normalizer import normalize_query

__all__ = ["DEFAULT_CATEGORY", "golden_line", "run"]

DEFAULT_CATEGORY = "logged"
"""The category of promoted questions in the golden set's report."""


async def run(args: argparse.Namespace) -> int:
    if args.golden_command != "add":  # pragma: no cover - argparse allows only "add"
        raise DatasetError(f"unknown golden command {args.golden_command}")
    state = local_state(args.state)
    expected = list(dict.fromkeys(args.expect or []))
    if args.abstain and expected:
        raise DatasetError("a question to decline (--abstain) expects no document")
    if not args.abstain and not expected:
        raise DatasetError("name the document(s) that answer it (--expect ID), or --abstain")
    if expected and not args.no_check:
        await _check_ids(state, expected)
    questions = await _questions(state, args)
    rows = golden_rows(args.golden)
    known = {golden_identity(row): str(row.get("id")) for row in rows}
    added = 0
    for question in questions:
        line = golden_line(question, next_golden_id(rows), expected, args)
        twin = known.get(golden_identity(line))
        if twin is not None:
            message = f"already in {args.golden} as {twin}: {line['query']!r}"
            if args.question is not None:
                raise DatasetError(message)
            say(f"skipped, {message}")
            continue
        append_golden(args.golden, line)
        rows.append(line)
        known[golden_identity(line)] = str(line["id"])
        added += 1
        print(
            f"added {line['id']} to {args.golden}: {line['query']!r} → "
            f"{'abstain' if args.abstain else ', '.join(expected)}"
        )
    if not added:
        raise DatasetError("nothing added: every question is already in the golden set")
    return 0


def golden_line(
    question: LoggedQuestion, golden_id: str, expected: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    """The golden line of a logged question (the golden format: src/kr/golden.py)."""
    text = args.query or question.question
    if not text:
        raise DatasetError(
            f"question {question.id}: only its terms were logged (KR_LOG_STORE=terms); "
            "pass its wording with --query"
        )
    context: dict[str, Any] = {name: question.context.get(name) for name in GOLDEN_CONTEXT}
    context["tenant"] = question.tenant
    return {
        "id": golden_id,
        "query": text,
        "category": args.category,
        "expected": expected,
        "forbidden": [],
        **context,
        "abstain": bool(args.abstain),
        "intent": "knowledge",
        "expected_version": None,
        "fact": None,
        "source": f"question_log:{question.id}",
    }


async def _questions(state: LocalState, args: argparse.Namespace) -> list[LoggedQuestion]:
    log = state.question_log
    if args.question is not None:
        found = await log.get(args.question, ALL_TENANTS)
        if found is None:
            raise DatasetError(f"no logged question {args.question} (kr gaps --json lists ids)")
        return [found]
    now = time.time()
    report = await gap_report(
        log,
        moment(args.since, now, "since"),
        moment(args.until, now, "until"),
        args.tenant or ALL_TENANTS,
        now=now,
    )
    group = next((g for g in report.groups if g.id == args.gap), None)
    if group is None:
        raise DatasetError(
            f"no gap group {args.gap} in this period (kr gaps lists them; same --since/--until)"
        )
    latest: dict[str, LoggedQuestion] = {}  # one line per wording: the latest asked
    for question in sorted(group.questions, key=lambda q: q.at):
        latest[normalize_query(question.text).text] = question
    return list(latest.values())


async def _check_ids(state: LocalState, expected: list[str]) -> None:
    """Every expected id names a document or section of the active version (a typo would
    make a golden query no version can pass)."""
    catalog = await (await active_package(state)).read_catalog()
    known = {d.semantic_id for d in catalog.documents} | {s.section_id for s in catalog.sections}
    unknown = [name for name in expected if name not in known]
    if unknown:
        raise DatasetError(
            f"the active version has no document or section {', '.join(unknown)} "
            "(rebuild with the new document first, or --no-check)"
        )
