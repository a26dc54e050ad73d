"""Generator port over any OpenAI-compatible ``/chat/completions`` endpoint, with httpx.

Why a generic adapter: local runs (llama.cpp, vLLM, Ollama) and hosted APIs speak the same chat
protocol, so one small client covers them; the prompt layout and the citation rules stay in the
sans-I/O stage (:mod:`router.support.generation`). Every failure becomes a
:class:`~router.errors.GenerationError` whose message never carries the API key.
"""

from __future__ import annotations

from typing import Any

import httpx

from router.adapters.http_client import OwnedHttpClient
from router.contract import AgentKnowledgeContext
from router.errors import GenerationError
from router.ports import GeneratedAnswer
from router.support.generation import build_messages, parse_citations

__all__ = ["OpenAICompatibleGenerator"]


class OpenAICompatibleGenerator(OwnedHttpClient):
    """Writes an answer from the context package only, at temperature 0.

    Owns (and closes) its httpx client unless one is injected; use ``async with`` or
    :meth:`aclose`. An owned client is created on first use, inside the running event loop.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 20.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.model = model
        self._url = httpx.URL(base_url.rstrip("/") + "/chat/completions")
        self._shown_url = str(self._url.copy_with(username=None, password=None, query=None))
        self._api_key = api_key
        super().__init__(client, timeout_s)

    async def generate(self, question: str, context: AgentKnowledgeContext) -> GeneratedAnswer:
        """One chat completion over :func:`build_messages`; cited ids parsed from the text."""
        body = {
            "model": self.model,
            "messages": build_messages(question, context),
            "temperature": 0,
        }
        response = await self._post(body)
        text, served_model = self._read_reply(response)
        return GeneratedAnswer(text=text, cited_ids=parse_citations(text), model=served_model)

    def _headers(self) -> dict[str, str]:
        if not self._api_key:
            return {}
        return {"Authorization": f"Bearer {self._api_key}"}

    def _redact(self, message: str) -> str:
        if self._api_key:
            message = message.replace(self._api_key, "***")
        return message

    def _fail(self, message: str) -> GenerationError:
        return GenerationError(self._redact(f"LLM endpoint {self._shown_url}: {message}"))

    async def _post(self, body: dict[str, Any]) -> httpx.Response:
        return await self._post_json(self._url, body, self._headers(), self._fail)

    def _read_reply(self, response: httpx.Response) -> tuple[str, str]:
        try:
            payload = response.json()
        except ValueError as exc:
            raise self._fail("response is not valid JSON") from exc
        try:
            content = payload["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise self._fail("response has no choices[0].message.content") from exc
        if not isinstance(content, str):
            raise self._fail("choices[0].message.content is not text")
        served = payload.get("model")
        return content, served if isinstance(served, str) and served else self.model
