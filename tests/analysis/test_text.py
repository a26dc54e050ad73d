"""The ASCII fast paths of ``router.analysis.text`` give what the general forms give, on every
word and text of the golden and BEIR vocabularies and on the characters around ASCII."""

from __future__ import annotations

import re
import unicodedata

import pytest

from router.analysis.text import fold, has_diacritics, normalize_text, split_camel
from tests.analysis.vocabularies import VOCABULARIES, texts_of

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_ACRONYM_PLURAL = re.compile(r"^([A-Z]{2,})s$")
_WORD = re.compile(r"[^\W_]+")
EDGES = ["", "a", "A", "Aa", "aA", "APRs", "APR", "ǅemal", "ǈubo", "ﬁle", "Straße", "İstanbul"]
EDGES += ["K", "Ωmega", "ΣΑΣ", "workPermit", "x9Y", "\ufeffBOM", "ção", "NFD: çã"]


def general_normalize(text: str) -> str:
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    return unicodedata.normalize("NFC", text)


def general_fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def general_has_diacritics(word: str) -> bool:
    return any(unicodedata.combining(ch) for ch in unicodedata.normalize("NFD", word))


def general_split_camel(word: str) -> list[str]:
    plural = _ACRONYM_PLURAL.match(word)
    if plural:
        return [plural.group(1)]
    return [part for part in _CAMEL_BOUNDARY.split(word) if part]


def _check(words: list[str]) -> None:
    for word in words:
        assert fold(word) == general_fold(word), word
        assert has_diacritics(word) == general_has_diacritics(word), word
        assert split_camel(word) == general_split_camel(word), word


@pytest.mark.parametrize("name", VOCABULARIES)
def test_fast_paths_match_the_general_forms(
    name: str, vocabulary_texts: dict[str, list[str]]
) -> None:
    texts = texts_of(vocabulary_texts, name)
    words = {w for text in texts for w in _WORD.findall(text)}
    _check(sorted(words))
    for text in texts[:: max(1, len(texts) // 500)]:
        assert normalize_text(text) == general_normalize(text)
        nfd = unicodedata.normalize("NFD", text).replace("\n", "\r\n")
        assert normalize_text(nfd) == general_normalize(nfd)


def test_fast_paths_match_around_ascii() -> None:
    _check(EDGES + [unicodedata.normalize("NFD", w) for w in EDGES])
    for text in [*EDGES, "a\r\nb\rc", "\ufeff\ufeffx\r\n", "plain ascii\n"]:
        assert normalize_text(text) == general_normalize(text)
