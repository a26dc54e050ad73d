"""A quoted Markdown sentence as text a person reads: no emphasis marks, links or table pipes.

Why: an answer quoted "| Cancelamentos pelo vendedor | até **2%** das vendas |" straight from
the section; the reader (and a text-to-speech or SMS channel) wants "Cancelamentos pelo
vendedor: até 2% das vendas". The context package keeps the Markdown: a model reads it well.
"""

from __future__ import annotations

import re

__all__ = ["plain_sentence"]

_WIKILINK = re.compile(r"\[\[([^\[\]|]+)(?:\|([^\[\]]+))?\]\]")
_IMAGE = re.compile(r"!\[([^\[\]]*)\]\([^()\s]*\)")
_LINK = re.compile(r"\[([^\[\]]+)\]\([^()\s]*\)")
_EMPHASIS = re.compile(r"(\*{1,3}|_{1,3}|`+|~~)(?=\S)(.+?)(?<=\S)\1")
_BLOCK_MARK = re.compile(r"^\s*(?:#{1,6}\s+|>\s*|[-*+]\s+|\d+[.)]\s+)")
_TABLE_RULE = re.compile(r"^\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?$")
_SPACES = re.compile(r"\s+")


def plain_sentence(markdown: str) -> str:
    """``markdown`` (one sentence or table row) without its Markdown: a table row's cells read
    "first: second; third", links keep their text, emphasis and list or heading marks go."""
    text = markdown.strip()
    if _TABLE_RULE.match(text):
        return ""
    if text.startswith("|"):
        cells = [c.strip() for c in text.strip("|").split("|") if c.strip()]
        text = f"{cells[0]}: {'; '.join(cells[1:])}" if len(cells) > 1 else "".join(cells)
    text = _BLOCK_MARK.sub("", text)
    text = _WIKILINK.sub(lambda m: m.group(2) or m.group(1), text)
    text = _IMAGE.sub(lambda m: m.group(1), text)
    text = _LINK.sub(lambda m: m.group(1), text)
    previous = None
    while previous != text:  # nested emphasis: ***a*** or **_a_**
        previous, text = text, _EMPHASIS.sub(lambda m: m.group(2), text)
    return _SPACES.sub(" ", text).strip()
