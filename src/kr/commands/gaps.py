"""``kr gaps``: the content gaps of the local state's question log, as a table or JSON.

What a gap is and how questions are grouped: :mod:`router.ops.gaps` (the same report as
``GET /v1/gaps`` and the playground's ``/gaps``). The local log is the operator's: every tenant's
questions are shown unless ``--tenant`` narrows them. ``kr golden add --gap ID`` promotes a
group's questions into the golden set.
"""

from __future__ import annotations

import argparse
import json
import time

from kr.local import local_state
from kr.progress import progress_bar
from router.errors import InvalidRequestError
from router.ops.gaps import GapReport, gap_report
from router.ops.questions import ALL_TENANTS, iso, parse_when

__all__ = ["moment", "run"]

BAR_WIDTH = 20


def moment(raw: str | None, now: float, name: str) -> float | None:
    """``--since``/``--until``: YYYY-MM-DD, an ISO timestamp, unix seconds or ``7d``/``24h``."""
    if raw is None:
        return None
    try:
        return parse_when(raw, now)
    except ValueError as exc:
        raise InvalidRequestError(
            f"--{name} {raw!r}: expected YYYY-MM-DD, an ISO timestamp, unix seconds or 7d/24h"
        ) from exc


async def run(args: argparse.Namespace) -> int:
    state = local_state(args.state)
    now = time.time()
    since = moment(args.since, now, "since")
    until = moment(args.until, now, "until")
    scope = args.tenant or ALL_TENANTS
    log = state.question_log
    total = await log.count(
        since if since is not None else 0.0, until if until is not None else now + 1, scope
    )
    with progress_bar(total, "reading the question log") as advance:
        report = await gap_report(log, since, until, scope, now=now, advance=advance)
    if args.json:
        print(json.dumps(report.as_json(args.limit), ensure_ascii=False, indent=2))
    else:
        _table(report, args.limit)
    return 0


def _table(report: GapReport, limit: int) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text  # cells as plain text: "[email]" is no rich markup

    console = Console()
    scope = "every tenant" if report.scope == ALL_TENANTS else f"tenant {report.scope}"
    console.print(
        f"{report.questions} question(s) from {iso(report.since)} to {iso(report.until)} "
        f"({scope}): {report.gaps} unanswered, in {len(report.groups)} group(s)"
    )
    if not report.groups:
        return
    table = Table(show_lines=False)
    for column in ("group", "count", "", "first / last seen", "tenant", "example", "why"):
        table.add_column(column, overflow="fold")
    table.add_column("nearest (score)", overflow="fold")
    most = max(g.count for g in report.groups)
    for group in report.groups[:limit]:
        bar = "█" * max(1, round(BAR_WIDTH * group.count / most))
        nearest = "\n".join(f"{n['section_id']} ({n['score']:.2f})" for n in group.nearest()) or "—"
        cells = (
            group.id,
            str(group.count),
            bar,
            f"{iso(group.first_seen)}\n{iso(group.last_seen)}",
            group.tenant or "—",
            group.example.text,
            group.reason,
            nearest,
        )
        table.add_row(*(Text(cell) for cell in cells))
    console.print(table)
