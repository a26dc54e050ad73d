"""Content gaps: which logged questions are gaps, how they group, and the log's privacy
(redaction before a question is stored, terms only, retention)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from router.adapters.local.state import LocalState
from router.contract import QueryRequest
from router.errors import ConfigError
from router.ops.gaps import REFORMULATED, find_gaps, gap_report
from router.ops.query_log import QueryRecorder
from router.ops.questions import ALL_TENANTS, LoggedQuestion, LogPolicy, Nearest, parse_when
from router.ops.redaction import redact, scrub_terms
from router.ops.retention import apply_retention
from router.service import KnowledgeService
from tests.common import ALFA, BETA, TODAY

T0 = 1_780_000_000.0


def _q(
    qid: int,
    terms: str,
    *,
    at: float = 0.0,
    outcome: str = "nothing",
    level: str = "NONE",
    tenant: str | None = None,
    caller: str | None = None,
    nearest: tuple[Nearest, ...] = (),
    reason: str | None = None,
) -> LoggedQuestion:
    return LoggedQuestion(
        id=qid,
        at=T0 + at,
        tenant=tenant,
        caller=caller,
        question=f"pergunta {qid}: {terms}",
        terms=tuple(terms.split()),
        outcome=outcome,  # type: ignore[arg-type]
        level=level,
        reason=reason,
        nearest=nearest,
    )


def test_declined_low_and_reformulated_questions_are_gaps_and_group_by_shared_terms() -> None:
    log = [
        _q(
            1,
            "cancel assinatur",
            reason="no document of this knowledge base uses the terms",
            nearest=(Nearest("billing", "billing.plans", 0.21),),
        ),
        _q(
            2,
            "cancel assinatur plan",
            at=60,
            outcome="evidence",
            level="LOW",
            nearest=(Nearest("billing", "billing.plans", 0.34),),
        ),
        _q(3, "quer cancel assinatur", at=120),
        _q(4, "apr valid", at=10, outcome="answer", level="HIGH"),  # answered: no gap
        _q(5, "exportar relatori pdf", at=30, outcome="answer", level="LOW"),
        _q(6, "exportar relatori", at=90),
        # answered HIGH, then the same caller asks again in other words: the first was no answer
        _q(7, "senh esquec", at=200, outcome="answer", level="HIGH", caller="c1"),
        _q(8, "recuper senh", at=230, outcome="answer", level="HIGH", caller="c1"),
        # the same words later by another caller: no reformulation
        _q(9, "trocar senh", at=400, outcome="answer", level="HIGH", caller="c2"),
        # same terms as 1, another tenant: its own group
        _q(10, "cancel assinatur", at=5, tenant=ALFA),
    ]
    groups = find_gaps(log)
    shape = [(g.id, g.tenant, g.count, sorted(q.id or 0 for q in g.questions)) for g in groups]
    assert shape == [
        ("g1", None, 3, [1, 2, 3]),
        ("g5", None, 2, [5, 6]),
        ("g7", None, 1, [7]),
        ("g10", ALFA, 1, [10]),
    ]
    cancel = groups[0]
    assert cancel.first_seen == T0 and cancel.last_seen == T0 + 120
    assert cancel.nearest()[0] == {
        "doc_id": "billing",
        "section_id": "billing.plans",
        "score": 0.34,
        "questions": 2,
    }
    assert cancel.terms[:2] == ["assinatur", "cancel"]
    assert groups[2].reason == REFORMULATED
    assert groups[1].reasons == ["answered with LOW confidence", "declined"]
    shown = cancel.as_json()
    assert shown["count"] == 3 and shown["example"].startswith("pergunta")
    assert shown["questions"][0]["id"] == 3  # the latest first


def test_a_reformulation_needs_the_same_caller_shortly_after_and_a_shared_term() -> None:
    late = [
        _q(1, "senh esquec", outcome="answer", level="HIGH", caller="c"),
        _q(2, "senh nov", at=500, caller="c", outcome="answer", level="HIGH"),
    ]
    unrelated = [
        _q(1, "senh esquec", outcome="answer", level="HIGH", caller="c"),
        _q(2, "apr valid", at=30, caller="c", outcome="answer", level="HIGH"),
    ]
    assert find_gaps(late) == [] and find_gaps(unrelated) == []


def test_a_long_log_groups_near_linearly() -> None:
    log = [_q(i, f"topic{i % 50} comum extra{i % 7}", at=i) for i in range(1, 5001)]
    started = time.perf_counter()
    groups = find_gaps(log)
    assert time.perf_counter() - started < 10
    assert sum(g.count for g in groups) == 5000


# --- redaction ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        ("meu email é joao.silva@empresa.com.br", "meu email é [email]"),
        ("CPF 123.456.789-09 ou 12345678909", "CPF [cpf] ou [cpf]"),
        ("CNPJ 12.345.678/0001-90 ou 12345678000190", "CNPJ [cnpj] ou [cnpj]"),
        ("ligue (11) 98765-4321 ou +55 11 3456 7890", "ligue [phone] ou [phone]"),
        ("protocolo 20240115123", "protocolo [cpf]"),
        ("celular 987654321", "celular [phone]"),
        ("protocolo 123456789012", "protocolo [number]"),
        ("validade da APR em 2026-06-15, NR-35 item 35.5.1, 30 dias", None),
    ],
)
def test_personal_data_becomes_placeholders(raw: str, stored: str | None) -> None:
    assert redact(raw) == (raw if stored is None else stored)


_digits = st.text(alphabet="0123456789", min_size=1, max_size=1)
_words = st.text(alphabet="abcdefghijklmnopqrstuvwxyzçãé ", max_size=30)


def _formatted_cpf(d: str) -> str:
    return f"{d[:3]}.{d[3:6]}.{d[6:9]}-{d[9:]}"


def _formatted_cnpj(d: str) -> str:
    return f"{d[:2]}.{d[2:5]}.{d[5:8]}/{d[8:12]}-{d[12:]}"


@settings(max_examples=300, deadline=None)
@given(
    before=_words,
    after=_words,
    kind=st.sampled_from(["cpf", "cpf-bare", "cnpj", "cnpj-bare", "phone", "mobile", "run"]),
    digits=st.text(alphabet="0123456789", min_size=14, max_size=20),
)
def test_no_personal_number_survives_redaction(
    before: str, after: str, kind: str, digits: str
) -> None:
    secret = {
        "cpf": _formatted_cpf(digits[:11]),
        "cpf-bare": digits[:11],
        "cnpj": _formatted_cnpj(digits[:14]),
        "cnpj-bare": digits[:14],
        "phone": f"({digits[:2]}) {digits[2:6]}-{digits[6:10]}",
        "mobile": f"+55 {digits[:2]} 9{digits[2:6]}-{digits[6:10]}",
        "run": digits,
    }[kind]
    stored = redact(f"{before} {secret} {after}")
    assert not any(ch.isdigit() for ch in stored), stored


@settings(max_examples=200, deadline=None)
@given(
    user=st.from_regex(r"[a-z][a-z0-9._]{0,15}", fullmatch=True),
    domain=st.from_regex(r"[a-z]{2,10}(\.[a-z]{2,5}){1,2}", fullmatch=True),
    text=_words,
)
def test_no_email_survives_redaction(user: str, domain: str, text: str) -> None:
    stored = redact(f"{text} {user}@{domain}, {text}")
    assert "@" not in stored and "[email]" in stored


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyzãçé ,.?!-", max_size=80))
def test_text_without_personal_data_is_kept(text: str) -> None:
    assert redact(text) == text


def test_terms_of_redacted_data_are_not_kept() -> None:
    question = "meu email joao.silva@empresa.com.br e cpf 12345678909 para cancelar"
    terms = ["email", "joa", "silv", "empres", "12345678909", "cpf", "cancel"]
    assert scrub_terms(terms, question) == ["email", "cpf", "cancel"]


# --- the recorder writes the questions, redacted; retention ---------------------------------------


def _served(state: LocalState, policy: LogPolicy, clock: list[float]) -> KnowledgeService:
    recorder = QueryRecorder(
        state.query_log, questions=state.question_log, policy=policy, wall_clock=lambda: clock[0]
    )
    return KnowledgeService(
        kv=state.kv, blobs=state.blobs, recorder=recorder, question_log=state.question_log
    )


def _ask(service: KnowledgeService, query: str, caller: str = "c", **fields: object) -> None:
    request = QueryRequest(query=query, **fields)  # type: ignore[arg-type]
    asyncio.run(service.query(request, today=TODAY, caller=caller))


def test_served_questions_are_logged_redacted_with_their_outcome(state: LocalState) -> None:
    clock = [T0]
    service = _served(state, LogPolicy(), clock)
    _ask(service, "Qual a validade padrão da APR?")
    _ask(service, "meu cpf é 123.456.789-09, como faço a declaração do imposto de renda?")
    _ask(service, "Qual a validade da APR?", page="apr-form", tenant=ALFA)
    rows = asyncio.run(state.question_log.read(0, T0 + 1, ALL_TENANTS, 0, 10))
    assert len(rows) == 3 and rows[0].outcome == "answer"
    assert rows[1].question is not None and "123" not in rows[1].question
    assert "[cpf]" in rows[1].question and rows[1].outcome in {"evidence", "nothing"}
    assert rows[1].reason and rows[1].level in {"LOW", "NONE"}
    assert rows[0].nearest and rows[0].nearest[0].doc_id == "apr"
    assert rows[2].tenant == ALFA and rows[2].context == {"page": "apr-form"}
    assert rows[0].caller and rows[0].caller != "c"  # a hash, never the credential
    only_alfa = asyncio.run(state.question_log.read(0, T0 + 1, ALFA, 0, 10))
    assert [r.tenant for r in only_alfa] == [ALFA]
    assert asyncio.run(state.question_log.read(0, T0 + 1, BETA, 0, 10)) == []
    # the warming log keeps no question the redaction changed
    logged = asyncio.run(state.query_log.frequent(10, since=0))
    assert all("123" not in str(entry.request) for entry in logged) and len(logged) == 2


def test_terms_only_keeps_no_question_text(state: LocalState) -> None:
    service = _served(state, LogPolicy(store="terms"), [T0])
    _ask(service, "Como cancelo o contrato do joao.silva@empresa.com.br?")
    (row,) = asyncio.run(state.question_log.read(0, T0 + 1, ALL_TENANTS, 0, 10))
    assert row.question is None and row.terms and "joa" not in " ".join(row.terms)
    assert asyncio.run(state.query_log.frequent(10, since=0)) == []


def test_retention_deletes_what_is_older_than_n_days(state: LocalState) -> None:
    clock = [T0 - 40 * 86400]
    service = _served(state, LogPolicy(), clock)
    _ask(service, "Qual a validade padrão da APR?")
    clock[0] = T0 - 86400
    _ask(service, "O que é permissão de trabalho?")
    report = asyncio.run(apply_retention(state.query_log, state.question_log, 30, now=T0))
    assert report.questions_deleted == 1 and report.query_hours_deleted == 1
    left = asyncio.run(state.question_log.read(0, T0 + 1, ALL_TENANTS, 0, 10))
    assert [r.question for r in left] == ["O que é permissão de trabalho?"]


def test_the_log_policy_checks_itself() -> None:
    with pytest.raises(ConfigError, match="KR_LOG_STORE"):
        LogPolicy(store="everything")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="KR_LOG_RETENTION_DAYS"):
        LogPolicy(retention_days=0)


def test_periods_read_dates_timestamps_and_spans() -> None:
    assert parse_when("2026-06-15", 0) == parse_when("2026-06-15T00:00:00Z", 0)
    assert parse_when("7d", T0) == T0 - 7 * 86400 and parse_when("24h", T0) == T0 - 86400
    with pytest.raises(ValueError):
        parse_when("last tuesday", T0)


def test_a_report_reads_a_long_log_page_by_page(tmp_path: Path) -> None:
    state = LocalState(tmp_path / "s")  # its D1 file has the migrations applied
    rows = [dataclasses.replace(_q(i, f"tema{i % 3} falta", at=i), id=None) for i in range(1, 1201)]
    asyncio.run(state.question_log.record(rows))
    pages: list[int] = []
    report = asyncio.run(gap_report(state.question_log, 0, T0 + 2000, advance=pages.append))
    assert report.questions == 1200 and pages == [500, 500, 200]
    assert sum(g.count for g in report.groups) == 1200
