"""The golden set: one JSON query per line, with what it expects (ids, abstention, intent).

Each line holds ``id``, ``query`` and optionally ``category``, ``expected`` (document or section
ids), ``forbidden`` (ids that must not be returned), ``abstain``, ``intent``, the request context
(``tenant``, ``page``, ``tab``, ``focus``, ``date``), ``expected_version`` and ``fact``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from router.contract import QueryRequest
from router.errors import DatasetError

__all__ = [
    "DEFAULT_GOLDEN",
    "GOLDEN_CONTEXT",
    "GOLDEN_NAME",
    "GOLDEN_TOP_K",
    "GoldenQuery",
    "append_golden",
    "golden_identity",
    "golden_rows",
    "load_golden",
    "next_golden_id",
]

DEFAULT_GOLDEN = Path("eval/golden.jsonl")
"""The golden set, from the project root (the default set of ``kr eval`` and of the gate)."""
GOLDEN_NAME = "golden"  # the set's name in reports and in the gate's table
GOLDEN_TOP_K = 10  # results asked for per golden query (ranking metrics look at most this deep)
DEFAULT_CATEGORY = "uncategorised"  # of a line without ``category``
DEFAULT_INTENT = "knowledge"  # of a line without ``intent``


@dataclass(frozen=True)
class GoldenQuery:
    """One evaluation query; ``grades`` (BEIR qrels) overrides the binary relevance of
    ``expected``; ``intent`` None means the set does not judge intents."""

    id: str
    query: str
    category: str
    expected: list[str]
    forbidden: list[str]
    abstain: bool
    intent: str | None
    request: QueryRequest
    expected_version: str | None = None
    fact: str | None = None
    grades: Mapping[str, int] | None = None


def load_golden(path: str | Path) -> list[GoldenQuery]:
    """The golden set (one JSON object per line); a bad line is a :class:`DatasetError`."""
    source = Path(path)
    if not source.is_file():
        raise DatasetError(f"golden set {source} not found (one JSON query per line expected)")
    queries = []
    for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            request = QueryRequest(
                query=row["query"],
                tenant=row.get("tenant"),
                page=row.get("page"),
                tab=row.get("tab"),
                focus=row.get("focus"),
                date=row.get("date"),
                top_k=GOLDEN_TOP_K,
            )
            version = row.get("expected_version")
            queries.append(
                GoldenQuery(
                    id=str(row["id"]),
                    query=row["query"],
                    category=row.get("category", DEFAULT_CATEGORY),
                    expected=list(row.get("expected") or []),
                    forbidden=list(row.get("forbidden") or []),
                    abstain=bool(row.get("abstain")),
                    intent=row.get("intent") or DEFAULT_INTENT,
                    request=request,
                    expected_version=None if version is None else str(version),
                    fact=row.get("fact"),
                )
            )
        except ValueError as exc:  # json and pydantic errors
            detail = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            raise DatasetError(f"{source}:{number}: invalid query: {detail}") from exc
        except (KeyError, TypeError, AttributeError) as exc:
            raise DatasetError(f"{source}:{number}: missing or malformed field {exc}") from exc
    if not queries:
        raise DatasetError(f"golden set {source} holds no queries")
    return queries


GOLDEN_CONTEXT = ("tenant", "page", "tab", "focus", "date")
"""The request context a golden line carries (``None`` where it was not set)."""


def golden_identity(row: Mapping[str, object]) -> tuple[object, ...]:
    """What makes two golden lines the same question: the query as the cache normalises it
    (case, accents kept, spaces and punctuation folded) and its request context."""
    from router.stages.normalizer import normalize_query

    query = normalize_query(str(row.get("query") or "")).text
    return (query, *(row.get(name) or None for name in GOLDEN_CONTEXT))


def golden_rows(path: str | Path) -> list[dict[str, object]]:
    """The golden set's lines as JSON objects (none when the file does not exist yet)."""
    source = Path(path)
    if not source.is_file():
        return []
    rows = []
    for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError as exc:
            raise DatasetError(f"{source}:{number}: invalid JSON: {exc}") from exc
    return rows


def next_golden_id(rows: list[dict[str, object]]) -> str:
    """``q`` and the next number after the highest ``qNNN`` id of the set (``q001`` first)."""
    numbers = [
        int(str(row.get("id"))[1:])
        for row in rows
        if str(row.get("id", "")).startswith("q") and str(row.get("id"))[1:].isdigit()
    ]
    return f"q{max(numbers, default=0) + 1:03d}"


def append_golden(path: str | Path, row: Mapping[str, object]) -> None:
    """Add one line to the golden set (a newline first if the file lacks its last one); the
    line is checked the way :func:`load_golden` reads it before it is written."""
    target = Path(path)
    line = json.dumps(dict(row), ensure_ascii=False)
    try:
        QueryRequest.model_validate(
            {"query": row.get("query"), **{name: row.get(name) for name in GOLDEN_CONTEXT}}
        )
    except ValidationError as exc:
        raise DatasetError(f"not a valid golden query: {exc.errors()[0]['msg']}") from exc
    existing = target.read_bytes() if target.is_file() else b""
    prefix = b"\n" if existing and not existing.endswith(b"\n") else b""
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("ab") as out:
        out.write(prefix + line.encode("utf-8") + b"\n")
