"""Detects instruction-like text inside knowledge (prompt injection), in Portuguese and English.

Why at build *and* query time: the compiler flags the sections once (cheap, visible in the
catalog), and the answer builder drops flagged sentences so knowledge text never reaches an
answer as an instruction; it is still indexed and quotable as data.
"""

from __future__ import annotations

import re

from router.analysis.text import fold

__all__ = ["INJECTION_FLAG", "looks_like_injection", "split_sentences"]

INJECTION_FLAG = "prompt_injection"

_PATTERNS = [
    r"\b(ignore|ignorar|ignora|desconsidere|desconsiderar|esqueca|esquecer)\b.{0,40}"
    r"\b(instruc\w*|regras?|orientac\w*|instructions?|rules?|prompts?|politicas?)\b",
    r"\b(ignore|disregard|forget)\b.{0,30}\b(previous|prior|above|all)\b",
    r"(^|\s)(system|sistema|assistant|assistente)\s*:",
    r"\byou are now\b|\bvoce (agora )?e (agora )?um\b|\bnovas? instruc\w*\b",
    r"\b(revele|revelar|mostre|reveal|print)\b.{0,40}\b(senhas?|passwords?|segredos?|secrets?|"
    r"tokens?|chaves?|keys?|credenciais|credentials?|prompt)\b",
    r"\bprompt do sistema\b|\bsystem prompt\b|\bjailbreak\b|\bmodo desenvolvedor\b",
]
_INJECTION = re.compile("|".join(f"(?:{p})" for p in _PATTERNS))
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+|\n+")


def looks_like_injection(text: str) -> bool:
    """True when the text reads like an instruction aimed at an assistant or model."""
    return _INJECTION.search(fold(text)) is not None


def split_sentences(text: str) -> list[str]:
    """Rough sentence split (punctuation or line breaks); enough to quote and to filter."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]
