"""Picks the structured fact that answers a value question (PRD §33: answer without an LLM).

Why a glossary: fact names are camelCase identifiers, often English (``defaultValidityDays``),
while questions are Portuguese ("qual a validade padrão?"); a small bilingual glossary of the words
fact names are made of lets both meet on the same stems.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from router.analysis.analyzer import Analyzer
from router.analysis.text import split_camel
from router.knowledge.model import FactValue
from router.package.view import PackageView
from router.safety.fields import fact_flagged

__all__ = ["FACT_NAME_GLOSSARY", "FactMatch", "best_fact", "fact_terms"]

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
    doc_index: int
    name: str
    value: FactValue
    overlap: int


def fact_terms(analyzer: Analyzer, name: str) -> set[str]:
    """Stems a fact name stands for: its camelCase words and their glossary translations."""
    words: list[str] = []
    for part in split_camel(name):
        lowered = part.casefold()
        words.append(lowered)
        words.extend(FACT_NAME_GLOSSARY.get(lowered, ()))
    return set(analyzer.terms(" ".join(words)))


def best_fact(
    package: PackageView,
    doc_indices: Iterable[int],
    query_terms: Sequence[str],
    answer_type: str = "any",
) -> FactMatch | None:
    """The fact of the first documents sharing most stems with the question, if any does; a fact
    flagged as prompt injection (its name or value) never answers. When the question asks for a
    person ("quem ...") or a number ("quantos ..."), a fact of that kind wins over one of the
    other kind ("quem aprova a APR?" is the approver, not ``approvalSlaHours``)."""
    wanted = set(query_terms)
    best: FactMatch | None = None
    best_key = (False, 0)
    for doc_index in doc_indices:
        doc = package.documents[doc_index]
        for name, value in doc.facts.items():
            if fact_flagged(doc, name):
                continue
            overlap = len(wanted & fact_terms(package.analyzer, name))
            key = (_fits(value, answer_type), overlap)
            if overlap and (best is None or key > best_key):
                best, best_key = FactMatch(doc_index, name, value, overlap), key
    return best


def _fits(value: FactValue, answer_type: str) -> bool:
    """Whether a fact's value is of the kind the question asks for."""
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    if answer_type == "person":
        return isinstance(value, str)
    if answer_type == "number":
        return numeric
    return True
