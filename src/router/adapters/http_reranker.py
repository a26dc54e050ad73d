"""Reranker port over an HTTP ``/rerank`` endpoint, with httpx: the Cohere/Jina shape, or TEI's.

Why these shapes: one request layout serves most rerankers one can host or rent. The Cohere
shape — ``{"model", "query", "documents": [...], "top_n"}`` → ``{"results": [{"index",
"relevance_score"}]}`` — is Cohere's ``/v2/rerank``, Jina's ``/v1/rerank``, and what vLLM,
Infinity, LocalAI and llama.cpp's server answer on ``/rerank``. Hugging Face's Text Embeddings
Inference (``api="tei"``) takes ``{"query", "texts"}`` and answers ``[{"index", "score"}]``.
Results come back best first and maybe fewer than asked; they are mapped back to the passages
by ``index`` (``router.stages.rerank.scores_by_index``).

Every failure — refused connection, timeout, HTTP error, a body of another shape, an index out
of range — becomes a :class:`~router.errors.RerankError` whose message never carries the API
key; the cascade then keeps the fused order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import httpx

from router.adapters.http_client import OwnedHttpClient
from router.checks import check_choice
from router.errors import RerankError
from router.stages.rerank import scores_by_index

__all__ = ["DEFAULT_TIMEOUT_S", "RERANK_APIS", "HttpReranker", "RerankApi"]

RerankApi = Literal["cohere", "tei"]
RERANK_APIS: tuple[RerankApi, ...] = ("cohere", "tei")
DEFAULT_TIMEOUT_S = 2.0
"""The transport's own bound; the cascade stops waiting at ``rerank_timeout_ms`` anyway."""


class HttpReranker(OwnedHttpClient):
    """Scores passages with one POST to ``url`` (the endpoint itself, e.g.
    ``http://127.0.0.1:8080/rerank`` or ``https://api.cohere.com/v2/rerank``).

    Owns (and closes) its httpx client unless one is injected; use ``async with`` or
    :meth:`aclose`.
    """

    def __init__(
        self,
        url: str,
        model: str = "",
        api_key: str | None = None,
        api: RerankApi = "cohere",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        check_choice("HttpReranker", "api", api, RERANK_APIS)
        self._url = httpx.URL(url)
        self._shown_url = str(self._url.copy_with(username=None, password=None, query=None))
        self.model = model or f"{api}:{self._shown_url}"
        self._model_field = model
        self._api_key = api_key
        self.api = api
        super().__init__(client, timeout_s)

    async def rerank(self, question: str, passages: Sequence[str]) -> list[float]:
        """One score per passage, in their order (see the module docstring for the shapes)."""
        if not passages:
            return []
        payload = await self._post(self._body(question, passages))
        return scores_by_index(self._pairs(payload), len(passages), self._who())

    def _body(self, question: str, passages: Sequence[str]) -> dict[str, Any]:
        if self.api == "tei":
            return {"query": question, "texts": list(passages), "truncate": True}
        body: dict[str, Any] = {
            "query": question,
            "documents": list(passages),
            "top_n": len(passages),
        }
        if self._model_field:
            body["model"] = self._model_field
        return body

    def _pairs(self, payload: Any) -> list[tuple[object, object]]:
        """(index, score) pairs of either shape, or a :class:`RerankError` naming what is wrong."""
        if self.api == "tei":
            rows, score_key = payload, "score"
        else:
            rows = payload.get("results") if isinstance(payload, dict) else None
            score_key = "relevance_score"
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            expected = "a list of {index, score}" if self.api == "tei" else "results: [...]"
            raise self._fail(f"response is not {expected}")
        return [(row.get("index"), row.get(score_key)) for row in rows]

    def _who(self) -> str:
        return f"rerank endpoint {self._shown_url}"

    def _fail(self, message: str) -> RerankError:
        text = f"{self._who()}: {message}"
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return RerankError(text)

    async def _post(self, body: dict[str, Any]) -> Any:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        response = await self._post_json(self._url, body, headers, self._fail)
        try:
            return response.json()
        except ValueError as exc:
            raise self._fail("response is not valid JSON") from exc
