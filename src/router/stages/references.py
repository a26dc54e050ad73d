"""Stage 1 — reference resolution (PRD §32): a follow-up question completed from the turn before.

Why rules on the text: "Qual a validade da APR?" then "e a da PT?" or "quem aprova ela?" carry
their subject in the previous turn only. Rewriting the follow-up into a whole question ("Qual a
validade da PT?", "quem aprova APR?") before anything else keeps every later stage — exact
ids, BM25, the cache key — unchanged and explainable: the trace shows the question searched.
Only the caller's own ``context`` (earlier turns) is read; when it holds no question, or the
follow-up names its own subject, the question is left as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from router.contract import MAX_QUERY_CHARS

__all__ = ["Resolution", "previous_question", "resolve_references"]

_ROLE = re.compile(r"^\s*(?:user|usuário|usuario|pergunta|q|human|you|você|voce)\s*:\s*", re.I)
_OTHER_ROLE = re.compile(r"^\s*(?:assistant|assistente|bot|ai|resposta|a)\s*:", re.I)
# "e a da PT?", "e para a PT?", "e na NR-35?", "and for the PT?"
_ELLIPSIS = re.compile(
    r"^\s*(?:e|and)\s+(?:(?:o|a|os|as|the)\s+)?"
    r"(?P<prep>do|da|dos|das|de|no|na|nos|nas|em|para|pra|of|for|in)\s+(?P<subject>.+?)\s*\??\s*$",
    re.I,
)
# The subject of a question: its last prepositional phrase ("... da APR?", "... do EPI?").
_SUBJECT = re.compile(
    r"^(?P<head>.*?\S)\s+(?P<prep>do|da|dos|das|de|no|na|nos|nas|para|of|for)\s+"
    r"(?P<subject>[^?]+?)\s*\??\s*$",
    re.I,
)
# Else its last noun phrase after an article ("Como preencher a PT?").
_OBJECT = re.compile(
    r"^(?P<head>.*?)\b(?:o|a|os|as|um|uma|the)\s+(?P<subject>[^?]+?)\s*\??\s*$", re.I
)
_PRONOUN = re.compile(
    r"\b(?P<pronoun>ele|ela|eles|elas|dele|dela|deles|delas|nele|nela|isso|isto|"
    r"o mesmo|a mesma|it|them)\b",
    re.I,
)
_PRONOUN_PREFIX = {
    "dele": "de", "dela": "de", "deles": "de", "delas": "de", "nele": "em", "nela": "em",
}  # fmt: skip
# A follow-up is short: a longer question names its own subject.
_MAX_FOLLOW_UP_WORDS = 6


@dataclass(frozen=True)
class Resolution:
    """The question to search with, and how it was completed (None: as asked)."""

    text: str
    rule: str | None = None
    previous: str | None = None


def previous_question(context: str | None) -> str | None:
    """The caller's last question in ``context``: its last line that is not the assistant's
    (a ``user:`` prefix stripped), preferring one that ends with "?"."""
    if not context:
        return None
    turns = [line.strip() for line in context.splitlines() if line.strip()]
    asked = [_ROLE.sub("", t) for t in turns if not _OTHER_ROLE.match(t)]
    asked = [t for t in asked if t]
    if not asked:
        return None
    questions = [t for t in asked if t.endswith("?")]
    return (questions or asked)[-1]


def resolve_references(query: str, context: str | None) -> Resolution:
    """``query`` completed from the previous question in ``context`` when it is an ellipsis
    ("e a da PT?") or leans on a pronoun ("quem aprova ela?"); else ``query`` itself."""
    previous = previous_question(context)
    if previous is None or len(query.split()) > _MAX_FOLLOW_UP_WORDS:
        return Resolution(query)
    ellipsis = _ELLIPSIS.match(query)
    if ellipsis:
        found = _SUBJECT.match(previous)
        head = found.group("head") if found else previous.rstrip(" ?")
        text = f"{head} {ellipsis.group('prep')} {ellipsis.group('subject')}?"
        return Resolution(text[:MAX_QUERY_CHARS], "ellipsis", previous)
    pronoun = _PRONOUN.search(query)
    found = _SUBJECT.match(previous) or _OBJECT.match(previous)
    if pronoun and found:
        word = pronoun.group("pronoun").casefold()
        subject = found.group("subject")
        replacement = f"{_PRONOUN_PREFIX[word]} {subject}" if word in _PRONOUN_PREFIX else subject
        text = query[: pronoun.start()] + replacement + query[pronoun.end() :]
        return Resolution(text[:MAX_QUERY_CHARS], "pronoun", previous)
    return Resolution(query)
