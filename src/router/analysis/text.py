"""Character-level text normalisation shared by every stage that compares strings.

Why one module: build and runtime, ids and free text must fold accents and case the same way,
or an id typed without accents would miss the index.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["collapse_spaces", "fold", "has_diacritics", "normalize_text", "slugify", "split_camel"]

_SPACES = re.compile(r"\s+")
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_ACRONYM_PLURAL = re.compile(r"^([A-Z]{2,})s$")
_NON_SLUG = re.compile(r"[^a-z0-9]+")


# ASCII text is its own NFC and NFD form, has no combining mark, and casefolds as it lower-cases:
# each function below answers it without the Unicode tables (the analyzer's hot path: most words
# of English and of code, many of Portuguese). tests/analysis/test_text.py holds them to the
# general forms on the golden and BEIR vocabularies.


def normalize_text(text: str) -> str:
    """NFC, no BOM, LF line ends: one canonical form for NFC/NFD and CRLF variants of a text."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text.isascii():
        return text
    return unicodedata.normalize("NFC", text.lstrip("\ufeff"))


def fold(text: str) -> str:
    """Casefold and strip diacritics (``Permissão`` → ``permissao``)."""
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def has_diacritics(word: str) -> bool:
    """True when the word carries an accent that folding would remove."""
    if word.isascii():
        return False
    return any(unicodedata.combining(ch) for ch in unicodedata.normalize("NFD", word))


def split_camel(word: str) -> list[str]:
    """``workPermit`` → ``[work, Permit]``; ``APRs`` → ``[APR]`` (an acronym's plural)."""
    rest = word[1:]
    if rest == rest.lower() and word:  # no capital after the first letter: nothing to split
        return [word]
    plural = _ACRONYM_PLURAL.match(word)
    if plural:
        return [plural.group(1)]
    return [part for part in _CAMEL_BOUNDARY.split(word) if part]


def slugify(text: str) -> str:
    """Heading → section slug: folded, non-alphanumerics collapsed to ``-``."""
    return _NON_SLUG.sub("-", fold(normalize_text(text))).strip("-")


def collapse_spaces(text: str) -> str:
    """Trim and collapse runs of whitespace to one space."""
    return _SPACES.sub(" ", text).strip()
