"""Stage 1 — query normalizer: one canonical form of the question (PRD §5).

Why keep the original too: ids such as ``workPermit.validity`` are case-sensitive to read but
matched case-insensitively; the folded form is for matching, the NFC form for display.
"""

from __future__ import annotations

import re

from router.analysis.text import collapse_spaces, fold, normalize_text
from router.results import NormalizedQuery

__all__ = ["normalize_query"]

_EDGE_PUNCTUATION = re.compile(r"^[\s\"'“”‘’¿¡(\[]+|[\s\"'“”‘’?!.,;:)\]]+$")


def normalize_query(raw: str) -> NormalizedQuery:
    text = _EDGE_PUNCTUATION.sub("", collapse_spaces(normalize_text(raw)))
    return NormalizedQuery(original=raw, text=text, folded=fold(text))
