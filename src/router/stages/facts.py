"""Stage — picks the structured fact that answers a value question (PRD §33: answer without an LLM).

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
    package: PackageView, doc_indices: Iterable[int], query_terms: Sequence[str]
) -> FactMatch | None:
    """The fact of the first documents sharing most stems with the question, if any does; a fact
    flagged as prompt injection (its name or value) never answers."""
    wanted = set(query_terms)
    best: FactMatch | None = None
    for doc_index in doc_indices:
        doc = package.documents[doc_index]
        for name, value in doc.facts.items():
            if fact_flagged(doc, name):
                continue
            overlap = len(wanted & fact_terms(package.analyzer, name))
            if overlap and (best is None or overlap > best.overlap):
                best = FactMatch(doc_index, name, value, overlap)
    return best
