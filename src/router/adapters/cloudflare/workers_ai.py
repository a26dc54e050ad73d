"""The Workers AI binding as the query embedder, the LLM generator and the reranker ports.

Why the embedder is named by model: a package's vectors can only be queried with the model that
made them, and the manifest records that model id (``@cf/baai/bge-m3`` for packages published to
Cloudflare); the service picks this embedder when the active manifest names a ``@cf/`` model.
The request is the one ``kr build`` sends for the passages (no "query:"/"passage:" prefixes, so
``kind`` does not change it; ``pooling`` as the model needs): both come from
:mod:`router.vectors.workers_ai_models`.

Why the generator reuses :mod:`router.support.generation`: the prompt layout (router policy,
knowledge as delimited data, question) and the citation parsing are product rules shared with the
OpenAI-compatible adapter; only the transport differs. Every failure becomes a
:class:`~router.errors.GenerationError`.

The reranker is ``@cf/baai/bge-reranker-base``, a cross-encoder: ``{"query", "contexts":
[{"text"}], "top_k"}`` → ``{"response": [{"id", "score"}]}``, ``id`` being the context's index
(``top_k`` is always the number of passages: the model returns only ``top_k`` rows). It was
trained on English and Chinese and reads 512 tokens of question + passage: on Portuguese
knowledge it is not known to help (docs/adr/0015), so the Worker runs it only when
``KR_RERANKER=workers-ai`` asks for it. Every failure becomes a
:class:`~router.errors.RerankError` (the cascade then keeps the fused order).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from router.adapters.cloudflare.jsconv import to_js, to_py
from router.contract import AgentKnowledgeContext
from router.errors import BindingError, GenerationError, RerankError
from router.ports import GeneratedAnswer
from router.stages.rerank import scores_by_index
from router.support.generation import build_messages, parse_citations
from router.vectors.workers_ai_models import (
    BGE_M3,
    MAX_CHARS_PER_CALL,
    MAX_TEXTS_PER_CALL,
    embedding_model,
    embedding_rows,
    text_batches,
)

__all__ = [
    "BGE_M3_DIMENSIONS",
    "BGE_M3_MODEL",
    "DEFAULT_LLM_MODEL",
    "DEFAULT_RERANK_MODEL",
    "MAX_EMBED_BATCH",
    "WorkersAiEmbedder",
    "WorkersAiGenerator",
    "WorkersAiReranker",
]

BGE_M3_MODEL = BGE_M3.model_id
BGE_M3_DIMENSIONS = BGE_M3.dimensions
MAX_EMBED_BATCH = MAX_TEXTS_PER_CALL
"""Texts per ``AI.run`` call of an embedding model."""
DEFAULT_LLM_MODEL = "@cf/meta/llama-3.3-70b-instruct-fp8-fast"
"""Instruct model for optional LLM answers (multilingual; follows the citation format)."""
DEFAULT_MAX_TOKENS = 512
DEFAULT_RERANK_MODEL = "@cf/baai/bge-reranker-base"
"""Cross-encoder reranker (English and Chinese; 512 tokens of question + passage)."""


class WorkersAiEmbedder:
    """``await AI.run(model, {"text": [...]})`` → ``data`` rows, in batches of ≤ 100 texts."""

    def __init__(
        self,
        binding: Any,
        model: str = BGE_M3_MODEL,
        dimensions: int = BGE_M3_DIMENSIONS,
        batch_size: int = MAX_EMBED_BATCH,
    ) -> None:
        self.binding = binding
        self.model_id = model
        self.dimensions = dimensions
        # the request shape of ``model``; ConfigError if the manifest's dimensions contradict it
        self.model = embedding_model(model, dimensions)
        self.batch_size = max(1, min(batch_size, self.model.max_texts))

    async def embed(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        vectors: list[list[float]] = []
        for chunk in text_batches(list(texts), self.batch_size, MAX_CHARS_PER_CALL):
            try:
                body = to_js(self.model.request(chunk))
                result = to_py(await self.binding.run(self.model_id, body))
            except Exception as exc:
                raise BindingError(f"Workers AI {self.model_id} failed: {exc}") from exc
            try:
                vectors += embedding_rows(result, self.model_id, len(chunk), self.dimensions)
            except ValueError as exc:
                raise BindingError(str(exc)) from exc
        return vectors


class WorkersAiGenerator:
    """One chat run at temperature 0 over :func:`build_messages`; cited ids parsed from the
    text (the router checks them against the retrieved chunks)."""

    def __init__(
        self, binding: Any, model: str = DEFAULT_LLM_MODEL, max_tokens: int = DEFAULT_MAX_TOKENS
    ) -> None:
        self.binding = binding
        self.model = model
        self.max_tokens = max_tokens

    async def generate(self, question: str, context: AgentKnowledgeContext) -> GeneratedAnswer:
        body = {
            "messages": build_messages(question, context),
            "temperature": 0,
            "max_tokens": self.max_tokens,
        }
        try:
            result = to_py(await self.binding.run(self.model, to_js(body)))
        except Exception as exc:
            raise GenerationError(f"Workers AI {self.model} failed: {exc}") from exc
        text = _reply_text(result)
        if text is None:
            raise GenerationError(f"Workers AI {self.model} returned no text response")
        return GeneratedAnswer(text=text, cited_ids=parse_citations(text), model=self.model)


class WorkersAiReranker:
    """One ``AI.run`` per query over every passage; scores mapped back by ``id``."""

    def __init__(self, binding: Any, model: str = DEFAULT_RERANK_MODEL) -> None:
        self.binding = binding
        self.model = model

    async def rerank(self, question: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        body = {
            "query": question,
            "contexts": [{"text": text} for text in passages],
            "top_k": len(passages),
        }
        try:
            result = to_py(await self.binding.run(self.model, to_js(body)))
        except Exception as exc:
            raise RerankError(f"Workers AI {self.model} failed: {exc}") from exc
        rows = result.get("response") if isinstance(result, dict) else None
        if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
            raise RerankError(f"Workers AI {self.model} returned no response rows")
        pairs = [(row.get("id"), row.get("score")) for row in rows]
        return scores_by_index(pairs, len(passages), f"Workers AI {self.model}")


def _reply_text(result: Any) -> str | None:
    """``{"response": "..."}`` (Workers AI text generation) or an OpenAI-style ``choices``."""
    if isinstance(result, str):
        return result
    if not isinstance(result, dict):
        return None
    response = result.get("response")
    if isinstance(response, str):
        return response
    try:
        content = result["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    return content if isinstance(content, str) else None
