"""kr eval checks that a fact question's answer states its fact's value, the version the
asker sees on the question's day; the quality gate holds that share."""

from __future__ import annotations

import datetime as dt

import pytest

from kr.fact_values import fact_values_of, states_one_of
from kr.gate.compare import DEFAULT_TOLERANCES
from kr.golden import GoldenQuery
from router.contract import QueryRequest
from router.knowledge.model import Document


@pytest.mark.parametrize(
    ("answer", "values", "stated"),
    [
        ("A validade padrão é de **30 dias**.", ["30"], True),
        ("Vale até 2026.", ["2"], False),
        ("Em 12 horas.", ["2"], False),
        ("O MEI fatura até R$ 81.000,00 por ano.", ["81000"], True),
        ("Entre 3 e 5 dias úteis.", ["4", "5"], True),
        ("Time de Cadastro e Risco", ["time de cadastro e risco"], True),
    ],
)
def test_an_answer_states_a_value_as_a_whole_token(
    answer: str, values: list[str], stated: bool
) -> None:
    assert states_one_of(answer, values) is stated


def _rule(version: int, months: int, since: str | None, until: str | None) -> Document:
    return Document(
        "apr.review.rule",
        "Revisão",
        f"v{version}.md",
        facts={"reviewIntervalMonths": months},
        valid_from=since,
        valid_until=until,
        version=str(version),
    )


def _asked(date: str | None, tenant: str | None = None) -> GoldenQuery:
    request = QueryRequest(
        query="A cada quantos meses?",
        date=dt.date.fromisoformat(date) if date else None,
        tenant=tenant,
    )
    return GoldenQuery(
        "q",
        request.query,
        "fact",
        [],
        [],
        False,
        None,
        request,
        fact="apr.review.rule.reviewIntervalMonths",
    )


def test_a_versioned_fact_is_read_from_the_version_of_the_questions_day() -> None:
    values = fact_values_of([_rule(1, 12, None, "2025-12-31"), _rule(2, 6, "2026-01-01", None)])
    assert values(_asked("2025-06-10"), "2026-06-15") == ["12"]
    assert values(_asked("2026-02-15"), "2026-06-15") == ["6"]
    assert values(_asked(None), "2026-06-15") == ["6"]  # no date: the day it is asked
    plain = GoldenQuery("p", "x", "paraphrase", [], [], False, None, QueryRequest(query="x"))
    assert values(plain, "2026-06-15") is None


def test_the_gate_holds_the_share_of_stated_fact_values() -> None:
    assert DEFAULT_TOLERANCES["fact_value_acc"].max_drop == 0.0
