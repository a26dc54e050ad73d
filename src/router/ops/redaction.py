"""Redaction of logged questions: personal data becomes a placeholder before a question is stored.

Why here, before the write: a question log outlives the request (days, docs/security.md, "The
query log"), and people paste their e-mail, CPF, CNPJ or phone number into a help box. What is
never written cannot leak from D1, a backup or a ``kr gaps`` table. Patterns, in this order (an
earlier one wins, so a CNPJ is never read as a phone number):

- e-mail addresses → ``[email]``;
- CNPJ, formatted (``12.345.678/0001-90``) or 14 bare digits → ``[cnpj]``;
- CPF, formatted (``123.456.789-09``) or 11 bare digits → ``[cpf]``;
- phone numbers: an optional ``+55``, an optional area code (``(11)``, ``11 ``), then 4–5 digits,
  an optional separator and 4 digits (``(11) 98765-4321``, ``+55 11 3456 7890``) → ``[phone]``;
- any other run of 7 or more digits → ``[number]``.

Dates (``2024-01-15``, ``15/01/2024``), norm names (``NR-35``, ``35.5.1``) and quantities keep
their digits. Pure Python (``re``): it runs in the Worker.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["PLACEHOLDERS", "redact", "redacted_spans", "scrub_terms"]

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("[email]", re.compile(r"[\w.%+-]+@[\w-]+(?:\.[\w-]+)+")),
    ("[cnpj]", re.compile(r"(?<![\w.])(?:\d{2}\.\d{3}\.\d{3}/\d{4}-\d{2}|\d{14})(?![\w])")),
    ("[cpf]", re.compile(r"(?<![\w.])(?:\d{3}\.\d{3}\.\d{3}-\d{2}|\d{11})(?![\w])")),
    (
        "[phone]",
        re.compile(
            r"(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,3}\)[ .-]?|\d{2,3}[ .-])?"
            r"\d{4,5}[ .-]?\d{4}(?!\w)"
        ),
    ),
    ("[number]", re.compile(r"\d{7,}")),
)
PLACEHOLDERS = tuple(placeholder for placeholder, _ in _PATTERNS)
"""What redacted data becomes; none of them is personal, and the analyzer drops their brackets."""

_TOKEN = re.compile(r"[^\W_]+")


def redact(text: str) -> str:
    """``text`` with every e-mail, CPF, CNPJ, phone number and long digit run replaced."""
    for placeholder, pattern in _PATTERNS:
        text = pattern.sub(placeholder, text)
    return text


def redacted_spans(text: str) -> list[str]:
    """The pieces of ``text`` that :func:`redact` replaces (to keep them out of the terms)."""
    spans: list[str] = []
    for _, pattern in _PATTERNS:
        spans.extend(match.group(0) for match in pattern.finditer(text))
        text = pattern.sub(" ", text)
    return spans


def scrub_terms(terms: Iterable[str], question: str) -> list[str]:
    """The analysed ``terms`` of ``question`` without those that come from redacted data.

    The analyzer saw the raw question, so an e-mail's ``joao.silva`` may be a term ``joa``: a
    term is dropped when it is a prefix of a word of a redacted piece, or one of those words a
    prefix of it, and so is any term holding five digits or more.
    """
    words = [w.casefold() for span in redacted_spans(question) for w in _TOKEN.findall(span)]
    kept = []
    for term in terms:
        folded = term.casefold()
        if sum(ch.isdigit() for ch in folded) >= 5:
            continue
        if any(_related(folded, word) for word in words):
            continue
        kept.append(term)
    return kept


def _related(term: str, word: str) -> bool:
    return bool(term) and (word.startswith(term) or (len(word) >= 3 and term.startswith(word)))
