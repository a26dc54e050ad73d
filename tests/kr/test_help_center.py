"""Help-center sets (``knowledge/`` + ``golden.jsonl``): ``kr eval`` compiles one in memory and
reports it, beside the golden set when asked for both; the gate recompiles one with each
version's build configuration and holds a candidate that makes it worse.

The set is written here: a few Markdown documents of a seller help center and seven questions,
among them fact questions, a paraphrase and one to decline. No e5 model: ``--embedder none``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from types import MappingProxyType

import pytest

from kr.cli import GATE_BLOCKED_EXIT, main
from kr.commands.eval import default_targets
from kr.commands.options import gate_settings
from kr.evaluation import calibration_error, side_by_side
from kr.gate.runs import SKIPPED_NOTE
from kr.help_center import EXTRA_SETS_VARIABLE, HelpCenter, is_help_center
from kr.outcomes import QueryOutcome
from router.adapters.local.state import LocalState
from router.compile.build import build_knowledge, write_package
from router.compile.indexer import BuildConfig
from router.errors import DatasetError
from router.package.format.fields import DEFAULT_FIELD_WEIGHTS
from tests.common import GOLDEN, KNOWLEDGE, TODAY, write_doc

DOCS = {
    "pedidos/postagem.md": (
        "envio.prazoPostagem",
        "Prazo de postagem",
        {"diasUteis": 2},
        "Depois da aprovação do pagamento, o vendedor despacha o pacote em até 2 dias úteis "
        "numa agência dos Correios ou num ponto parceiro.",
    ),
    "pos-venda/arrependimento.md": (
        "devolucao.arrependimento",
        "Devolução por arrependimento",
        {"prazoDias": 7},
        "O comprador pode desistir da compra em até 7 dias corridos depois de receber o "
        "produto, sem dizer o motivo; o frete de volta fica por conta da loja.",
    ),
    "financeiro/repasse.md": (
        "repasse.calendario",
        "Calendário de repasse",
        {"diasAposEntrega": 14},
        "O dinheiro de cada venda cai na conta bancária cadastrada 14 dias depois da entrega.",
    ),
    "financeiro/comissao.md": (
        "taxa.comissao",
        "Comissão por venda",
        {"percentual": 12},
        "A plataforma desconta 12 % do valor de cada pedido pago, frete excluído.",
    ),
    "conta/cadastro.md": (
        "conta.cadastro",
        "Cadastro de vendedor",
        {},
        "Para vender é preciso CPF ou CNPJ ativo, e-mail confirmado e uma conta bancária no "
        "mesmo titular.",
    ),
}
QUERIES = [
    ("h1", "exact_id", "envio.prazoPostagem", ["envio.prazoPostagem"], None, False),
    ("h2", "fact", "prazo de postagem", ["envio.prazoPostagem"], "diasUteis", False),
    ("h3", "fact", "comissão por venda", ["taxa.comissao"], "percentual", False),
    ("h4", "paraphrase", "posso desistir da compra", ["devolucao.arrependimento"], None, False),
    ("h5", "system_term", "calendário de repasse", ["repasse.calendario"], None, False),
    ("h6", "system_term", "cadastro de vendedor", ["conta.cadastro"], None, False),
    ("h7", "out_of_scope", "qual a capital da Austrália?", [], None, True),
]
# The body carries the paraphrase (no title word in it); a candidate that ignores it loses it.
BROKEN_WEIGHTS = MappingProxyType({**DEFAULT_FIELD_WEIGHTS, "body": 0.0})


def write_help_center(folder: Path) -> Path:
    for name, (doc_id, title, facts, body) in DOCS.items():
        lines = ["---", f"semanticId: {doc_id}", f"title: {title}"]
        if facts:
            lines += ["facts:", *(f"  {key}: {value}" for key, value in facts.items())]
        write_doc(folder / "knowledge", name, "\n".join([*lines, "---", f"# {title}", "", body]))
    rows = [
        {
            "id": query_id,
            "query": text,
            "category": category,
            "expected": expected,
            "abstain": abstain,
            "fact": f"{expected[0]}.{fact}" if fact else None,
        }
        for query_id, category, text, expected, fact, abstain in QUERIES
    ]
    (folder / "golden.jsonl").write_text(
        "\n".join(json.dumps(row, ensure_ascii=False) for row in rows) + "\n", encoding="utf-8"
    )
    return folder


@pytest.fixture
def help_center(tmp_path: Path) -> Path:
    return write_help_center(tmp_path / "lojinha")


def test_eval_compiles_a_help_center_set_and_reports_it(
    help_center: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reports = tmp_path / "reports"
    args = ["eval", str(help_center), "--embedder", "none", "--today", TODAY]
    assert main([*args, "--report-dir", str(reports), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    overall = printed["overall"]
    assert overall["n"] == len(QUERIES) and printed["info"]["documents"] == len(DOCS)
    assert overall["hit@1"] == 1.0 and overall["fact_value_acc"] == 1.0
    assert overall["abstention_recall"] == 1.0 and overall["false_abstention"] == 0.0
    assert overall["false_answer_rate"] == 0.0
    assert 0.0 <= overall["ece"] <= 1.0
    assert sum(b["count"] for b in overall["reliability"]) == len(QUERIES)
    saved = json.loads((reports / "metrics.json").read_text(encoding="utf-8"))
    assert saved["name"] == "lojinha" and saved["overall"] == overall
    assert all(0.0 <= q["confidence"] <= 1.0 for q in saved["queries"])
    assert "## False answers and calibration" in (reports / "report.md").read_text("utf-8")


def test_eval_prints_several_sets_side_by_side_with_one_report_each(
    state: LocalState, help_center: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reports = tmp_path / "reports"
    args = ["eval", str(GOLDEN), str(help_center), "--state", str(state.root)]
    args += ["--embedder", "none", "--today", TODAY, "--report-dir", str(reports)]
    assert main(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["golden", "lojinha"]
    labels = [line[:24].strip() for line in out[1:]]
    assert labels == [
        "queries",
        "hit@1",
        "hit@3",
        "MRR",
        "paraphrase hit@3",
        "out-of-scope declined",
        "false abstention",
        "false answers",
        "fact_value_acc",
        "ECE (confidence)",
    ]
    golden = json.loads((reports / "golden" / "metrics.json").read_text(encoding="utf-8"))
    mine = json.loads((reports / "lojinha" / "metrics.json").read_text(encoding="utf-8"))
    assert out[1].split()[1:] == [str(golden["overall"]["n"]), str(len(QUERIES))]
    assert golden["overall"]["fact_value_acc"] is not None
    assert mine["per_category"]["paraphrase"]["hit@3"] == 1.0
    assert main([*args, "--json", "--no-report"]) == 0
    assert set(json.loads(capsys.readouterr().out)) == {"golden", "lojinha"}


def test_side_by_side_leaves_a_metric_a_set_lacks_blank() -> None:
    from kr.evaluation import EvalReport

    empty = EvalReport("beir", {"n": 3, "hit@1": 0.5}, {}, {}, {}, [])
    lines = side_by_side([empty]).splitlines()
    assert lines[2].split()[-1] == "0.500"  # hit@1
    assert lines[5].split()[-1] == "-"  # paraphrase hit@3: no such category


def test_a_folder_that_is_neither_kind_of_set_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "half" / "knowledge").mkdir(parents=True)
    assert not is_help_center(tmp_path / "half")
    assert main(["eval", str(tmp_path / "half"), "--embedder", "none", "--no-report"]) == 1
    assert "neither a BEIR-layout collection nor a help-center set" in capsys.readouterr().err
    with pytest.raises(DatasetError, match="not a help-center set"):
        HelpCenter.load(tmp_path / "half")


def test_the_ece_is_the_weighted_gap_of_ten_equal_bins() -> None:
    pairs = [(0.95, True), (0.95, False), (1.0, True), (0.15, False)]
    ece, bins = calibration_error(pairs)
    # bin 0.9–1.0: mean 0.967, observed 2/3, weight 3/4; bin 0.1–0.2: 0.15 vs 0, weight 1/4
    assert ece == pytest.approx(0.75 * (2.9 / 3 - 2 / 3) + 0.25 * 0.15)
    assert [(b["low"], b["count"]) for b in bins] == [(0.1, 1), (0.9, 3)]
    assert calibration_error([]) == (None, [])


def _outcome(**fields: object) -> QueryOutcome:
    base: dict[str, object] = {
        "id": "q",
        "query": "q",
        "category": "c",
        "expected": ("doc",),
        "should_abstain": False,
        "abstained": False,
        "ranked": ("doc",),
        "rank": 1,
        "intent_ok": None,
        "leaks": 0,
        "path": "bm25",
        "latency_ms": 1.0,
        "stage_ms": {},
        "confidence_level": "HIGH",
        "top": (),
        "passed": True,
    }
    return QueryOutcome(**{**base, **fields})  # type: ignore[arg-type]


def test_a_false_answer_is_answered_and_wrong() -> None:
    assert not _outcome().false_answer and _outcome().top_relevant is True
    assert _outcome(rank=2).false_answer  # a wrong first result
    assert _outcome(fact_ok=False).false_answer  # the right page, not the fact's value
    assert _outcome(expected=(), should_abstain=True, rank=None).false_answer
    declined = _outcome(abstained=True, rank=None)
    assert not declined.false_answer and declined.top_relevant is False
    unjudged = _outcome(expected=(), rank=None)
    assert not unjudged.false_answer and unjudged.top_relevant is None


def test_the_gate_names_a_fact_question_whose_answer_lost_its_value() -> None:
    from kr.evaluation import EvalReport
    from kr.gate.compare import DEFAULT_TOLERANCES, compare_reports

    def report(fact_ok: bool) -> EvalReport:
        outcome = _outcome(fact_ok=fact_ok)
        return EvalReport("set", {"fact_value_acc": float(fact_ok)}, {}, {}, {}, [outcome])

    comparison = compare_reports("set", report(True), report(False), DEFAULT_TOLERANCES)
    assert not comparison.passed
    [change] = comparison.worse
    assert change.what == "answer no longer states the fact's value"


def _candidate(tmp_path: Path, config: BuildConfig, knowledge: Path = KNOWLEDGE) -> Path:
    return write_package(build_knowledge(knowledge, config).package, tmp_path / "candidate")


def test_gate_holds_a_candidate_whose_build_configuration_hurts_the_help_center(
    state: LocalState, help_center: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _candidate(tmp_path, BuildConfig(field_weights=BROKEN_WEIGHTS))
    no_golden = str(tmp_path / "no-golden.jsonl")  # the extra set alone decides
    gate = ["gate", str(folder), "--state", str(state.root), "--golden", no_golden]
    assert main([*gate, "--extra", str(help_center), "--today", TODAY]) == GATE_BLOCKED_EXIT
    captured = capsys.readouterr()
    assert "BLOCKED" in captured.out and "lojinha" in captured.err
    blocking = [line for line in captured.out.splitlines() if "<< BLOCKS" in line]
    assert blocking and all(line.split()[0] == "lojinha" for line in blocking)
    assert "lojinha: " in captured.out and " got worse" in captured.out  # the queries, listed


def test_gate_skips_a_help_center_when_the_build_configuration_is_the_same(
    state: LocalState, help_center: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kb = tmp_path / "kb"
    for source in KNOWLEDGE.rglob("*"):
        if source.is_file():
            target = kb / source.relative_to(KNOWLEDGE)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    write_doc(kb, "extra/zz.md", "---\nsemanticId: zz.note\ntitle: Nota\n---\nZebrafita.\n")
    folder = _candidate(tmp_path, BuildConfig(), kb)
    no_golden = str(tmp_path / "no-golden.jsonl")
    gate = ["gate", str(folder), "--state", str(state.root), "--golden", no_golden]
    assert main([*gate, "--extra", str(help_center)]) == 0
    out = capsys.readouterr().out
    assert "PASSES" in out
    assert [line.split()[0] for line in out.splitlines() if SKIPPED_NOTE in line] == ["lojinha"]


def test_extra_sets_come_from_the_environment_and_missing_ones_are_skipped(
    help_center: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    missing = tmp_path / "not-cloned"
    monkeypatch.setenv(EXTRA_SETS_VARIABLE, os.pathsep.join([str(help_center), str(missing)]))
    args = argparse.Namespace(
        tolerance=[], golden=GOLDEN, extra=[help_center], split="test", today=None
    )
    assert gate_settings(args).extra == (help_center,)  # named once
    assert default_targets()[1:] == [help_center]
    assert f"{missing}, which is not here: skipped" in capsys.readouterr().err
    monkeypatch.delenv(EXTRA_SETS_VARIABLE)
    assert default_targets() == [GOLDEN.relative_to(GOLDEN.parents[1])]
