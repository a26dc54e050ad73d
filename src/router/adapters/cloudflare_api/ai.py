"""Workers AI text embeddings through the REST API: ``POST /accounts/{id}/ai/run/{model}``.

Why: a package's section vectors must come from the model the Worker embeds questions with (its
``AI`` binding, :mod:`router.adapters.cloudflare.workers_ai`), and ``kr build`` runs outside any
Worker. Both sides send the request of :mod:`router.vectors.workers_ai_models`, so build and query
vectors are comparable. Nothing here is new transport: :class:`CloudflareAPI` authenticates,
retries 429/5xx and timeouts with bounded backoff, and turns the last failure into a
:class:`CloudflareAPIError` naming the model (``what``) and the HTTP status. An embedding call
changes nothing, so repeating it is always safe.

Batches stay within the API's limits: at most the model's ``maxItems`` texts (100) and
``MAX_CHARS_PER_CALL`` characters a call.
"""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import quote

import httpx

from router.adapters.background_loop import BackgroundLoop
from router.adapters.cloudflare_api.client import CloudflareAPI, CloudflareAPIError, RetryPolicy
from router.adapters.cloudflare_api.config import CloudflareAccount
from router.vectors.workers_ai_models import (
    MAX_CHARS_PER_CALL,
    embedding_model,
    embedding_rows,
    text_batches,
)

__all__ = ["WorkersAiApiEmbedder", "WorkersAiEncoder", "workers_ai_encoder"]

T = TypeVar("T")


class WorkersAiApiEmbedder:
    """The :class:`~router.ports.Embedder` port over the REST API (async, in the caller's loop)."""

    def __init__(
        self,
        api: CloudflareAPI,
        model: str,
        *,
        max_texts: int | None = None,
        max_chars: int = MAX_CHARS_PER_CALL,
    ) -> None:
        self.api = api
        self.model = embedding_model(model)
        self.model_id = self.model.model_id
        self.dimensions = self.model.dimensions
        self.batch_size = min(max_texts or self.model.max_texts, self.model.max_texts)
        self.max_chars = max_chars

    @property
    def path(self) -> str:
        """``/ai/run/@cf/baai/bge-m3``: the model id stays as it is, slashes included."""
        return f"/ai/run/{quote(self.model_id, safe='@/')}"

    async def embed(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        """Vectors of ``texts`` in order; ``kind`` changes nothing (see the models module)."""
        vectors: list[list[float]] = []
        for batch in text_batches(list(texts), self.batch_size, self.max_chars):
            vectors += await self._embed_batch(batch)
        return vectors

    async def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        result = await self.api.call(
            "POST",
            self.path,
            what=f"Workers AI {self.model_id} embedding of {len(batch)} texts",
            json_body=self.model.request(batch),
        )
        try:
            return embedding_rows(result, self.model_id, len(batch), self.dimensions)
        except ValueError as exc:
            raise CloudflareAPIError(str(exc)) from exc


class WorkersAiEncoder:
    """One :class:`WorkersAiApiEmbedder` on a :class:`BackgroundLoop`: the build's synchronous
    ``encode`` and the local service's async ``embed`` (which does not block the caller's loop).

    ``cache_id`` keys the vector cache: the model id and its pooling, so a change of either
    never reuses old vectors. Close it (or use ``with``) to close the HTTP client.
    """

    def __init__(self, embedder: WorkersAiApiEmbedder) -> None:
        self._embedder = embedder
        self.model_id = embedder.model_id
        self.dimensions = embedder.dimensions
        self.batch_size = embedder.batch_size
        self.cache_id = embedder.model.cache_id
        self._loop = BackgroundLoop(f"workers-ai {self.model_id}")

    def encode(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        return self._run(self._embedder.embed(list(texts), kind))

    async def embed(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        return await self._loop.run_async(self._embedder.embed(list(texts), kind))

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._loop.run(coroutine)

    def close(self) -> None:
        if not self._loop.closed:
            self._run(self._embedder.api.aclose())
            self._loop.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def workers_ai_encoder(
    model: str,
    account: CloudflareAccount,
    *,
    retry: RetryPolicy | None = None,
    client: httpx.AsyncClient | None = None,
) -> WorkersAiEncoder:
    """An encoder of ``model`` (a known Workers AI model, else ConfigError) for ``account``."""
    spec = embedding_model(model)
    api = CloudflareAPI(
        account.account_id, account.api_token, account.base_url, retry=retry, client=client
    )
    return WorkersAiEncoder(WorkersAiApiEmbedder(api, spec.model_id))
