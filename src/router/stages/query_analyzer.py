"""Stage 2 — query analyzer: terms, task type and intent (knowledge vs agentic) (PRD §6).

Why rules and not a model: the decision must be instant, explainable and identical in the
Worker; an imperative verb ("crie", "aprove") or a request to act ("quero cancelar") marks a
potential action for the future Intent Engine, a question word marks a knowledge need.
"""

from __future__ import annotations

import re

from router.analysis.analyzer import Analyzer
from router.config import DEFAULT_MAX_QUERY_WORDS
from router.contract import TaskType
from router.results import AnswerType, NormalizedQuery, QueryFeatures
from router.support.question_frame import ClosedClasses, frame_question

__all__ = ["analyze_query"]

# Imperatives (3rd-person/você forms) of verbs that change state in an application.
_IMPERATIVES = frozenset(
    [
        "crie",
        "cria",
        "gere",
        "abra",
        "emita",
        "registre",
        "cadastre",
        "inclua",
        "adicione",
        "aprove",
        "aprova",
        "reprove",
        "rejeite",
        "cancele",
        "cancela",
        "exclua",
        "apague",
        "delete",
        "remova",
        "edite",
        "altere",
        "atualize",
        "mude",
        "troque",
        "renove",
        "prorrogue",
        "assine",
        "feche",
        "encerre",
        "envie",
        "mande",
        "agende",
        "marque",
        "notifique",
        "baixe",
        "exporte",
        "imprima",
        "defina",
        "configure",
        "ative",
        "desative",
        "bloqueie",
        "desbloqueie",
        "libere",
        "suspenda",
        "reative",
        "atribua",
        "designe",
        "transfira",
        "anexe",
        "submeta",
        "solicite",
        "faca",
        "faça",
        "preencha",
        "salve",
        "duplique",
        "pause",
        "publique",
        "arquive",
        "reembolse",
        "estorne",
    ]
)
_ACTION_INFINITIVES = frozenset(
    [
        "criar",
        "gerar",
        "abrir",
        "emitir",
        "registrar",
        "cadastrar",
        "incluir",
        "adicionar",
        "aprovar",
        "reprovar",
        "rejeitar",
        "cancelar",
        "excluir",
        "apagar",
        "deletar",
        "remover",
        "editar",
        "alterar",
        "atualizar",
        "mudar",
        "trocar",
        "renovar",
        "prorrogar",
        "assinar",
        "fechar",
        "encerrar",
        "enviar",
        "mandar",
        "agendar",
        "marcar",
        "notificar",
        "baixar",
        "exportar",
        "imprimir",
        "definir",
        "configurar",
        "ativar",
        "desativar",
        "bloquear",
        "desbloquear",
        "liberar",
        "suspender",
        "reativar",
        "atribuir",
        "designar",
        "transferir",
        "anexar",
        "pausar",
        "publicar",
        "arquivar",
        "reembolsar",
        "estornar",
        "submeter",
        "solicitar",
        "preencher",
        "salvar",
    ]
)
_REQUEST_LEADS = (
    "quero", "preciso", "gostaria de", "pode", "podes", "poderia", "consegue", "voce pode",
    "você pode", "por favor", "favor", "me ajude a", "vamos",
)  # fmt: skip
_QUESTION_WORDS = frozenset(
    [
        "como",
        "o",
        "que",
        "qual",
        "quais",
        "quando",
        "onde",
        "quem",
        "quanto",
        "quanta",
        "quantos",
        "quantas",
        "porque",
        "por",
        "existe",
        "existem",
        "posso",
        "devo",
        "pode",
    ]
)
# Demonstratives point at what is on screen ("este campo", "nesta aba", "isso"): a closed class.
_DEICTIC = re.compile(
    r"\b(?:n|d)?(?:este|esta|esse|essa|estes|estas|esses|essas|isto|isso|aquilo)\b|\baqui\b|"
    r"\bthis (?:field|tab|page|screen)\b"
)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_PERSON_ASKED = re.compile(
    r"^(quem|who)\b|^(qual|que|which) (equipe|time|setor|area|departamento|pessoa|cargo|"
    r"responsavel|team|department|person|role)\b"
)
_NUMBER_ASKED = re.compile(
    r"^(quanto|quanta|quantos|quantas|how many|how much|how long)\b|"
    r"\b(quantos|quantas|prazo|a cada|de quanto em quanto|por quanto tempo|periodicidade)\b|"
    r"^qual (o|a) (valor|preco|peso|percentual|porcentagem|quantidade|numero|idade)\b"
)


def analyze_query(
    query: NormalizedQuery,
    analyzer: Analyzer,
    classes: ClosedClasses,
    max_words: int = DEFAULT_MAX_QUERY_WORDS,
) -> QueryFeatures:
    """Terms of the question's first ``max_words`` words (``Analyzer.bounded_terms``) without
    its frame words (``classes``: the analyzer's stems of them), intent and task type."""
    bounded = analyzer.bounded_terms(query.text, max_words)
    frame = frame_question(classes, bounded.terms)
    terms = frame.terms
    deictic = _DEICTIC.search(query.folded) is not None
    words = _WORD.findall(query.folded)
    potential_action = _is_action_request(query.folded, words)
    task_type = _task_type(query.folded, words)
    return QueryFeatures(
        terms=terms,
        intent="agentic" if potential_action else "knowledge",
        potential_action=potential_action,
        task_type=task_type,
        complexity="low" if len(terms) <= 4 else "medium" if len(terms) <= 12 else "high",
        short_query=len(terms) <= 2,
        deictic=deictic,
        value_question=task_type == "structured_numeric"
        or bool(re.match(r"^(qual|quais|quem|quando)\b", query.folded)),
        words=tuple(bounded.words),
        truncated=bounded.truncated,
        needs_ui_context=frame.only_the_screen and (deictic or frame.names_the_screen),
        answer_type=_answer_type(query.folded),
    )


def _answer_type(folded: str) -> AnswerType:
    """ "Quem ...", "qual equipe ..." ask for a person, a team or a role; "quantos ...",
    "prazo", "a cada ...", "qual o valor ..." for a number; "quais ..." for a list, which no
    single fact answers ("quais provas posso anexar?"); anything else takes either."""
    if _PERSON_ASKED.match(folded):
        return "person"
    if _NUMBER_ASKED.search(folded):
        return "number"
    if re.match(r"^(quais|which)\b", folded):
        return "list"
    return "any"


def _is_action_request(folded: str, words: list[str]) -> bool:
    if not words:
        return False
    rest = folded
    for lead in _REQUEST_LEADS:
        if rest.startswith(lead + " "):
            rest = rest[len(lead) + 1 :]
    rest_words = _WORD.findall(rest)
    if not rest_words:
        return False
    first = rest_words[0]
    if first in _IMPERATIVES:
        return True
    led = rest != folded
    if led and first in _ACTION_INFINITIVES:
        return True
    # "me ajude a criar", "quero que você aprove"
    if led and first in ("que", "voce", "você") and any(w in _IMPERATIVES for w in rest_words[:3]):
        return True
    return words[0] not in _QUESTION_WORDS and first in _ACTION_INFINITIVES and len(words) > 2


def _task_type(folded: str, words: list[str]) -> TaskType:
    if re.search(r"\b(diferenca|diferencas|versus|vs|comparar|compare|comparacao)\b", folded):
        return "comparative"
    if re.match(r"^(quanto|quanta|quantos|quantas)\b", folded) or re.search(
        r"\b(prazo|validade|quantos dias|quantas horas|qual o valor|percentual|limite)\b", folded
    ):
        return "structured_numeric"
    if re.match(r"^(como|de que forma|qual o procedimento|quais os passos)\b", folded):
        return "procedural"
    if re.match(r"^(por que|porque|por qual motivo)\b", folded):
        return "analytical"
    if len(words) <= 2:
        return "exploratory"
    return "factual"
