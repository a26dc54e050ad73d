"""The content-gaps loop end to end, locally (no vectors, fast): a day of questions through
``kr serve``'s app, the three most frequent unanswered topics in ``kr gaps`` with the documents
nearest to them, the missing document added and rebuilt, the questions promoted with
``kr golden add``, and the gate holding every later version to them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from kr.cli import ERROR_EXIT, GATE_BLOCKED_EXIT, main
from kr.golden import load_golden
from kr.local import local_authenticator, local_service
from router.api.app import create_app
from tests.common import write_doc

DOCS = {
    "apr.md": "---\nsemanticId: apr\ntitle: Análise Preliminar de Risco\n---\n\n"
    "# Análise Preliminar de Risco {#apr.intro}\n\nA APR identifica os riscos de uma tarefa "
    "antes de ela começar. A validade padrão da APR é de 30 dias.\n",
    "ferias.md": "---\nsemanticId: ferias\ntitle: Férias coletivas\n---\n\n"
    "# Férias coletivas {#ferias.intro}\n\nAs férias coletivas são avisadas com 15 dias de "
    "antecedência ao sindicato e aos empregados.\n",
}
NEW_DOC = (
    "---\nsemanticId: crachá\ntitle: Crachá de acesso\n---\n\n"
    "# Segunda via do crachá de acesso {#cracha.segunda-via}\n\nPara pedir a segunda via do "
    "crachá de acesso perdido, abra um chamado na portaria com o seu documento; o crachá novo "
    "fica pronto em dois dias.\n"
).replace("semanticId: crachá", "semanticId: cracha")
DAY = [
    *["Como peço a segunda via do crachá de acesso?"] * 3,
    "perdi meu crachá de acesso, como peço segunda via?",
    "segunda via crachá acesso",
    *["Qual o horário do refeitório da fábrica?"] * 2,
    "refeitório da fábrica abre que horas?",
    *["Como reservo a sala de reunião?"] * 2,
    "Qual a validade padrão da APR?",  # answered
    "Quando as férias coletivas são avisadas?",  # answered
]


def _build(knowledge: Path, state: Path, golden: Path, *more: str) -> int:
    args = ["build", str(knowledge), "--state", str(state), "--embedder", "none"]
    return main([*args, "--golden", str(golden), *more])


def test_from_a_day_of_questions_to_a_golden_set_the_gate_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KR_EXTRA_SETS", raising=False)
    knowledge, state, golden = tmp_path / "kb", tmp_path / "state", tmp_path / "golden.jsonl"
    for name, text in DOCS.items():
        write_doc(knowledge, name, text)
    golden.write_text(
        json.dumps({"id": "q001", "query": "Qual a validade padrão da APR?", "expected": ["apr"]})
        + "\n",
        encoding="utf-8",
    )
    assert _build(knowledge, state, golden) == 0

    # a day of questions through kr serve's app (anonymous callers)
    app = create_app(local_service(state, record=True), auth=local_authenticator(state))
    client = TestClient(app)
    for question in DAY:
        assert client.post("/v1/query", json={"query": question}).is_success
    capsys.readouterr()

    # the three most frequent unanswered topics, with the documents nearest to them
    assert main(["gaps", "--state", str(state), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["questions"] == len(DAY) and report["gaps"] == len(DAY) - 2
    top = report["groups"][:3]
    assert [g["count"] for g in top] == [5, 3, 2]
    assert "crachá" in top[0]["example"] and "refeitório" in top[1]["example"]
    assert "sala de reunião" in top[2]["example"]
    for group in top:
        assert group["reason"] and group["first_seen"] <= group["last_seen"]
        assert all({"doc_id", "section_id", "score"} <= set(n) for n in group["nearest"])
    assert main(["gaps", "--state", str(state)]) == 0  # the table
    assert "crachá" in capsys.readouterr().out

    # the missing document, rebuilt and activated (the gate passes: nothing got worse)
    write_doc(knowledge, "cracha.md", NEW_DOC)
    assert _build(knowledge, state, golden, "--full") == 0
    capsys.readouterr()

    # promote the group's questions; the gate then holds every later version to them
    add = ["golden", "add", "--state", str(state), "--golden", str(golden)]
    assert main([*add, "--gap", top[0]["id"], "--expect", "cracha"]) == 0
    added = capsys.readouterr().out
    assert added.count("added q") == 3  # one line per wording
    promoted = [q for q in load_golden(golden) if q.category == "logged"]
    assert len(promoted) == 3 and all(q.expected == ["cracha"] for q in promoted)
    assert main([*add, "--question", str(top[0]["example_id"]), "--expect", "cracha"]) == (
        ERROR_EXIT
    )  # a duplicate is refused
    assert "already in" in capsys.readouterr().err
    assert main([*add, "--question", str(top[2]["example_id"]), "--abstain"]) == 0
    assert load_golden(golden)[-1].abstain

    # a version without the document is held
    without = tmp_path / "without"
    for name, text in DOCS.items():
        write_doc(without, name, text)
    out = tmp_path / "out"
    assert _build(without, state, golden, "--out", str(out), "--no-activate", "--full") == 0
    candidate = next(p for p in out.iterdir() if (p / "manifest.json").is_file())
    capsys.readouterr()
    held = main(["gate", str(candidate), "--state", str(state), "--golden", str(golden)])
    assert held == GATE_BLOCKED_EXIT
    assert "cracha" in capsys.readouterr().out
