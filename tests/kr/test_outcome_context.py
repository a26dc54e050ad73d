"""A golden query's request context is kept in the report, so a failure can be asked again as it
was asked (the playground's golden-set view opens it with its tenant, page, tab, focus, date)."""

from __future__ import annotations

from kr.golden import load_golden
from kr.outcomes import request_context
from tests.common import GOLDEN


def test_the_report_keeps_the_context_each_golden_query_was_asked_in() -> None:
    queries = {q.id: q for q in load_golden(GOLDEN)}
    assert request_context(queries["q010"]) == {}
    assert request_context(queries["q061"]) == {"tenant": "construtora-alfa"}
    assert request_context(queries["q051"]) == {
        "page": "workPermit",
        "tab": "general",
        "focus": "app.page.workPermit.general.validUntil",
    }
    assert request_context(queries["q072"]) == {"date": "2025-06-10"}
