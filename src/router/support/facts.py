"""Picks the structured fact that answers a value question (PRD §33: answer without an LLM).

Why the sentence first: a fact answers only when the passage's best-matching sentence states its
value (``router.support.grounding``); the name only chooses among facts that sentence states.
Why a glossary: fact names are camelCase identifiers, often English (``defaultValidityDays``),
while questions are Portuguese ("qual a validade padrão?"); a small bilingual glossary of the words
fact names are made of lets both meet on the same stems.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from router.analysis.analyzer import Analyzer
from router.analysis.text import split_camel
from router.knowledge.model import FactValue
from router.package.view import PackageView
from router.support.grounding import ScoredSentence, states_value

__all__ = ["FACT_NAME_GLOSSARY", "FactMatch", "fact_in_sentence", "fact_terms", "fits"]

FACT_NAME_GLOSSARY: dict[str, tuple[str, ...]] = {
    "validity": ("validade", "prazo", "vencimento", "valida"),
    "valid": ("valida", "validade"),
    "days": ("dias", "prazo"),
    "hours": ("horas", "carga horaria"),
    "months": ("meses", "periodicidade"),
    "years": ("anos",),
    "weeks": ("semanas",),
    "minutes": ("minutos",),
    "max": ("maximo", "maxima", "limite"),
    "maximum": ("maximo", "maxima", "limite"),
    "min": ("minimo", "minima"),
    "minimum": ("minimo", "minima"),
    "default": ("padrao",),
    "approver": ("aprovador", "aprova", "aprovacao", "quem"),
    "approval": ("aprovacao", "aprova"),
    "responsible": ("responsavel", "quem"),
    "owner": ("responsavel", "dono", "quem"),
    "training": ("treinamento", "curso", "capacitacao"),
    "refresher": ("reciclagem",),
    "height": ("altura",),
    "meters": ("metros",),
    "review": ("revisao", "revisar"),
    "period": ("periodo", "periodicidade"),
    "frequency": ("frequencia", "periodicidade"),
    "deadline": ("prazo",),
    "worker": ("trabalhador", "trabalhadores"),
    "workers": ("trabalhadores",),
    "supervisor": ("supervisor",),
    "limit": ("limite",),
    "interval": ("intervalo",),
    "retention": ("retencao", "guardar", "arquivar"),
    "count": ("quantidade", "numero"),
    "business": ("uteis",),
    "percent": ("percentual", "porcentagem", "taxa"),
    "rate": ("taxa", "percentual"),
    "fee": ("taxa", "tarifa"),
    "team": ("equipe", "time", "setor", "quem"),
    "number": ("numero",),
    "voltage": ("tensao",),
    "weight": ("peso",),
    "temperature": ("temperatura",),
    "oxygen": ("oxigenio",),
    "emergency": ("emergencia",),
    "phone": ("telefone",),
    "contact": ("contato",),
    "signatures": ("assinaturas",),
    "required": ("obrigatorio", "obrigatoria"),
}


@dataclass(frozen=True)
class FactMatch:
    """A fact that answers the question: its document, name and value, how many of the
    question's stems its name shares (``overlap``), and where the passage states it (the
    package's section index and the sentence), when it does."""

    doc_index: int
    name: str
    value: FactValue
    overlap: int
    section: int | None = None
    sentence: str | None = None


def fact_terms(analyzer: Analyzer, name: str) -> set[str]:
    """Stems a fact name stands for: its camelCase words and their glossary translations."""
    words: list[str] = []
    for part in split_camel(name):
        lowered = part.casefold()
        words.append(lowered)
        words.extend(FACT_NAME_GLOSSARY.get(lowered, ()))
    return set(analyzer.terms(" ".join(words)))


def fact_in_sentence(
    package: PackageView,
    doc_index: int,
    sentence: ScoredSentence,
    query_terms: Sequence[str],
    facts: Mapping[str, FactValue],
) -> FactMatch | None:
    """Of ``facts`` (of the document, those that may answer: see ``fits``), the one whose value
    ``sentence`` (the passage's best match for the question) states; of several, the one whose
    name shares most stems with the question, then the one whose name says least else
    (``trainingHours`` before ``sepTrainingHours``), then the first."""
    wanted = set(query_terms)
    best: FactMatch | None = None
    best_key = (0, 0)
    for name, value in facts.items():
        if not states_value(sentence.text, value):
            continue
        named = fact_terms(package.analyzer, name)
        overlap = len(wanted & named)
        key = (overlap, -len(named - wanted))
        if best is None or key > best_key:
            best = FactMatch(doc_index, name, value, overlap, sentence.section, sentence.text)
            best_key = key
    return best


def fits(value: FactValue, answer_type: str) -> bool:
    """Whether a fact's value is of the kind the question asks for: "quem ..." a person or
    team (text), "quantos ..." a number; anything else takes either."""
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    if answer_type == "person":
        return isinstance(value, str)
    if answer_type == "number":
        return numeric
    return answer_type != "list"
