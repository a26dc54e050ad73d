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

__all__ = ["DEFAULT_GOLDEN", "GOLDEN_NAME", "GOLDEN_TOP_K", "GoldenQuery", "load_golden"]

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
