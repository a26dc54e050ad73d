"""The Workers AI text-embedding models, and the one request both the build and the Worker send.

Why one module for both sides: a package's section vectors are only comparable with query vectors
of the same model *called the same way*. ``kr build`` reaches Workers AI through the REST API
(``router.adapters.cloudflare_api.ai``), the Worker through its ``AI`` binding
(``router.adapters.cloudflare.workers_ai``); both build the request body with
:meth:`WorkersAiEmbeddingModel.request` and read the answer with :func:`embedding_rows`, so they
cannot drift apart.

What the request holds (Cloudflare's model schemas, ``cloudflare-docs``
``src/content/workers-ai-models/*.json``): ``{"text": [...]}``, at most 100 texts a call for
every model here; the answer is ``{"shape": [n, d], "data": [[...], ...]}``.

- No "query: "/"passage: " prefixes on either side: those are e5's; the bge models read the
  plain text (bge-m3 needs no instruction; bge-*-en-v1.5's optional query instruction is not
  used, so a question and a passage are embedded the same way, as in the Worker).
- ``pooling: "cls"`` for bge-*-en-v1.5, sent explicitly by both sides: those models were trained
  with CLS pooling (BAAI's sentence-transformers config), Cloudflare's default is ``mean`` only
  for backward compatibility and recommends ``cls``, and the two poolings give incompatible
  vectors, so leaving it to a default that might change would silently break old packages.
  bge-m3's schema has no ``pooling`` input.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from router.errors import ConfigError

__all__ = [
    "BGE_M3",
    "MAX_CHARS_PER_CALL",
    "MAX_TEXTS_PER_CALL",
    "WORKERS_AI_EMBEDDING_MODELS",
    "WorkersAiEmbeddingModel",
    "embedding_model",
    "embedding_rows",
    "is_workers_ai_model",
    "text_batches",
]

MAX_TEXTS_PER_CALL = 100
"""``maxItems`` of the ``text`` array in every model schema here."""
MAX_CHARS_PER_CALL = 100_000
"""Characters of text per call: keeps a request body near 100 kB, and — at two or more
characters a token, true of Portuguese and English prose — under the 60,000-token context
window bge-m3's model page gives. A passage is at most 2,000 characters
(``router.vectors.passages.MAX_PASSAGE_CHARS``), so a full batch of 100 can exceed it."""

Pooling = Literal["cls"]


@dataclass(frozen=True)
class WorkersAiEmbeddingModel:
    """One text-embedding model of Workers AI: its id, vector size and request shape."""

    model_id: str
    dimensions: int
    max_input_tokens: int
    pooling: Pooling | None = None
    max_texts: int = MAX_TEXTS_PER_CALL
    languages: str = "English"

    def request(self, texts: Sequence[str]) -> dict[str, Any]:
        """The body of one embedding call (REST ``ai/run`` or ``AI.run``) for ``texts``; an
        empty text is sent as one space (the schemas refuse empty strings)."""
        body: dict[str, Any] = {"text": [text or " " for text in texts]}
        if self.pooling is not None:
            body["pooling"] = self.pooling
        return body

    @property
    def cache_id(self) -> str:
        """What cached vectors of this model are filed under: the id, and the pooling when one
        is sent (vectors of another pooling are different vectors)."""
        return self.model_id + (f"+pooling={self.pooling}" if self.pooling else "")


BGE_M3 = WorkersAiEmbeddingModel("@cf/baai/bge-m3", 1024, 8192, languages="100+ languages")
WORKERS_AI_EMBEDDING_MODELS: dict[str, WorkersAiEmbeddingModel] = {
    model.model_id: model
    for model in (
        BGE_M3,
        WorkersAiEmbeddingModel("@cf/baai/bge-small-en-v1.5", 384, 512, "cls"),
        WorkersAiEmbeddingModel("@cf/baai/bge-base-en-v1.5", 768, 512, "cls"),
        WorkersAiEmbeddingModel("@cf/baai/bge-large-en-v1.5", 1024, 512, "cls"),
    )
}
"""The models ``kr build --embedder workers-ai:<id>`` accepts (dimensions from the model pages)."""


def is_workers_ai_model(model_id: str | None) -> bool:
    """Workers AI model ids start with ``@cf/`` (the manifest's ``embedding.model``)."""
    return bool(model_id) and str(model_id).startswith("@cf/")


def embedding_model(model_id: str, dimensions: int | None = None) -> WorkersAiEmbeddingModel:
    """The known model ``model_id``; an unknown ``@cf/`` id only with ``dimensions`` (a package
    built elsewhere: plain ``{"text"}`` requests). ConfigError for anything else, or when
    ``dimensions`` contradicts a known model's."""
    known = WORKERS_AI_EMBEDDING_MODELS.get(model_id)
    if known is not None:
        if dimensions is not None and dimensions != known.dimensions:
            raise ConfigError(
                f"{model_id} makes {known.dimensions}-dimensional vectors, not {dimensions}"
            )
        return known
    if is_workers_ai_model(model_id) and dimensions:
        return WorkersAiEmbeddingModel(model_id, dimensions, 512)
    choices = ", ".join(WORKERS_AI_EMBEDDING_MODELS)
    raise ConfigError(f"unknown Workers AI embedding model {model_id!r}; choose one of {choices}")


def text_batches(texts: Sequence[str], max_texts: int, max_chars: int) -> Iterator[list[str]]:
    """``texts`` in order, in batches of at most ``max_texts`` texts and ``max_chars``
    characters (a longer text goes alone)."""
    batch: list[str] = []
    size = 0
    for text in texts:
        if batch and (len(batch) >= max_texts or size + len(text) > max_chars):
            yield batch
            batch, size = [], 0
        batch.append(text)
        size += len(text)
    if batch:
        yield batch


def embedding_rows(result: Any, model_id: str, count: int, dimensions: int) -> list[list[float]]:
    """The ``data`` rows of an embedding answer, checked: ``count`` rows of ``dimensions``
    numbers. ValueError naming the model otherwise (each adapter turns it into its own error)."""
    rows = result.get("data") if isinstance(result, dict) else None
    if not isinstance(rows, list) or len(rows) != count:
        got = len(rows) if isinstance(rows, list) else "no"
        raise ValueError(f"Workers AI {model_id} returned {got} vectors for {count} texts")
    vectors: list[list[float]] = []
    for row in rows:
        if not isinstance(row, list) or len(row) != dimensions:
            size = len(row) if isinstance(row, list) else type(row).__name__
            raise ValueError(
                f"Workers AI {model_id} returned a vector of {size}; "
                f"expected {dimensions} dimensions"
            )
        vectors.append([float(v) for v in row])
    return vectors
