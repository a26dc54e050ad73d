"""The question's frame: words that shape a question but name no subject.

Why: "Onde encontro os componentes?" was ranked on *onde* and *encontro* (rare in a small
knowledge base, so heavy in BM25) and answered, at HIGH confidence, with EPI and emergency
passages; "O que significa isso?" matched the one page that says "significa". Interrogatives,
locative and demonstrative contractions ("desta", "aqui") and the verbs of asking ("explique",
"encontro", "serve") are left out of the search terms when the question names something else.
What is left decides whether a deictic question ("explique este campo") names anything at all
besides the screen (field, tab, page): if not, it needs the UI context to be answered, and
without it the router asks (``clarify_first``) instead of guessing.

Closed classes per analyzer language, stemmed by the package's own analyzer, so they meet the
question's terms whatever the stemmer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from router.analysis.analyzer import Analyzer

__all__ = [
    "FRAME_WORDS",
    "MODAL_WORDS",
    "UI_NOUNS",
    "ClosedClasses",
    "QuestionFrame",
    "asked_focus",
    "frame_question",
    "verb_stems",
]

FRAME_WORDS: dict[str, str] = {
    "portuguese": (
        "onde quais qual aqui ali la aí daqui dali desta deste destas destes nesta neste nestas "
        "nestes dessa desse dessas desses nessa nesse nessas nesses daquela daquele naquela "
        "naquele encontro encontrar encontra encontramos acho achar vejo ver vemos fica ficam "
        "explique explica explicar explicação significa significam significado serve servem "
        "faço fazer faz"
    ),
    "english": "where which here there explain explanation means meaning find locate",
}
"""Interrogatives, place and demonstrative words, and verbs of asking (stopwords aside)."""

UI_NOUNS: dict[str, str] = {
    "portuguese": (
        "campo campos tela telas página páginas aba abas botão botões opção opções item itens "
        "seção formulário menu janela ícone"
    ),
    "english": "field fields screen page tab button option item section form menu window icon",
}
"""What a deictic question may point at on screen: naming one names no subject yet."""


MODAL_WORDS: dict[str, str] = {
    "portuguese": (
        "quanto quanta quantos quantas posso pode podem podemos devo deve devem preciso precisa "
        "precisam consigo consegue quero queria gostaria pra"
    ),
    "english": "many much can could should must need want",
}
"""The modal verbs and quantity interrogatives of a question: searched with (they can match the
knowledge's own "precisa", "pode"), but never a concept the knowledge lacks — a help center
never writes "posso", and "quantas fotos posso colocar?" is not about something it lacks."""


@dataclass(frozen=True)
class QuestionFrame:
    """The terms to search with, and whether the question names nothing but the screen."""

    terms: list[str]
    only_the_screen: bool
    names_the_screen: bool  # a field, tab, page... is named ("explique o campo")


@dataclass(frozen=True)
class ClosedClasses:
    """The stems of the frame words and of the on-screen nouns under one analyzer: stemmed once
    per package view (``PackageView.derive``), not on every question (~0.2 ms each). Per view,
    because the accent lexicon a view's analyzer carries can change an unaccented word's stem."""

    frame: frozenset[str]
    on_screen: frozenset[str]
    modal: frozenset[str] = frozenset()

    @classmethod
    def of(cls, analyzer: Analyzer) -> ClosedClasses:
        return cls(
            _stems(analyzer, FRAME_WORDS),
            _stems(analyzer, UI_NOUNS),
            _stems(analyzer, MODAL_WORDS),
        )


def _stems(analyzer: Analyzer, table: dict[str, str]) -> frozenset[str]:
    return frozenset(analyzer.terms(table.get(analyzer.config.language, "")))


def frame_question(classes: ClosedClasses, terms: Sequence[str]) -> QuestionFrame:
    """``terms`` without the frame words when anything else is left (else all of them), and
    whether nothing but frame words and on-screen nouns was asked."""
    frame, on_screen = classes.frame, classes.on_screen
    content = [t for t in terms if t not in frame]
    return QuestionFrame(
        terms=content or list(terms),
        only_the_screen=not [t for t in content if t not in on_screen],
        names_the_screen=any(t in on_screen for t in content),
    )


_FOCUS = {
    "portuguese": re.compile(
        r"^(?:(?:em|de|com|por|para|a partir de|ate) )?"
        r"(?:qual|quais|quanto|quanta|quantos|quantas|que|quem)"
        r"(?: (?:e|sao|era|foi|sera))?(?: (?:o|a|os|as|um|uma))? ([^\W\d_]{3,})"
    ),
    "english": re.compile(
        r"^(?:what|which|who|how many|how much)(?: (?:is|are|was))?(?: (?:the|a|an))?"
        r" ([^\W\d_]{3,})"
    ),
}
"""The word a question asks about: the noun right after its interrogative ("qual o *desconto*
máximo…", "quantos *dígitos* tem…", "em quantos *dias* úteis…"), or the verb after "quem"
("quem *aprova* a PT?")."""


def asked_focus(analyzer: Analyzer, folded: str) -> str | None:
    """The stem of what the question asks for (its focus), if its wording shows one.

    Why: of two sentences holding as many of the question's words ("Desconto … máximo de 80%",
    "Duração máxima de 30 dias por promoção"), the one about what is asked — the noun after
    "qual o" — answers it; the other words only say where."""
    pattern = _FOCUS.get(analyzer.config.language)
    found = pattern.match(folded) if pattern is not None else None
    if found is None:
        return None
    terms = analyzer.terms(found.group(1))
    return terms[0] if terms else None


_VERB_FORMS = {
    "portuguese": re.compile(r"[^\W\d_]{2,}(?:ar|er|ir|ando|endo|indo)"),
    "english": re.compile(r"[^\W\d_]{3,}ing"),
}
"""Infinitives and gerunds, by their endings: in a question they say what the asker wants to
do; the thing asked about is a noun."""


def verb_stems(analyzer: Analyzer, words: Sequence[str]) -> frozenset[str]:
    """The stems of the question's words that read as infinitives or gerunds ("colocar",
    "enviando"), for the concept check: an unknown verb is a wording the knowledge does not use,
    not a concept it lacks (a noun ending like a verb, "lugar", is rare in a question's
    concept; "estagiário", "aprendiz", "seguro-desemprego" are nouns)."""
    pattern = _VERB_FORMS.get(analyzer.config.language)
    if pattern is None:
        return frozenset()
    return frozenset(
        stem for word in words if pattern.fullmatch(word) for stem in analyzer.terms(word)
    )
