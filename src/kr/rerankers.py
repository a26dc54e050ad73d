"""``--reranker SPEC`` of ``kr query``, ``kr serve`` and ``kr eval``: which reranker, if any.

Why a spec string: one option names any reranker — the offline ones by name, a service by its
URL — and the credentials stay in the environment, never on the command line (where ``ps``
and shell histories would show them). Off by default: docs/adr/0015 says what each is worth.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from router.errors import ConfigError
from router.ports import Reranker

__all__ = ["DEFAULT_RERANKER", "RERANKER_HELP", "reranker_from_spec"]

DEFAULT_RERANKER = "none"
RERANKER_HELP = (
    "rerank the fused top-N of queries whose confidence is not HIGH: none (default); local "
    "(lexical, offline); e5 (cosine with multilingual-e5-small, offline, passages from the "
    "vector cache); http:URL (a Cohere/Jina-shaped /rerank endpoint, $KR_RERANK_MODEL, "
    "$KR_RERANK_API_KEY); tei:URL (Text Embeddings Inference's /rerank); llm:BASE_URL "
    "(listwise, an OpenAI-compatible /chat/completions, $KR_LLM_MODEL, $KR_LLM_API_KEY)"
)


def reranker_from_spec(
    spec: str | None, environ: Mapping[str, str] | None = None
) -> Reranker | None:
    """The reranker a ``--reranker`` value names (None for ``none``); an unknown spec is a
    :class:`ConfigError` naming the choices."""
    env = os.environ if environ is None else environ
    spec = (spec or DEFAULT_RERANKER).strip()
    kind, _, target = spec.partition(":")
    if spec == "none":
        return None
    if spec == "local":
        from router.rerankers.lexical import LexicalReranker

        return LexicalReranker()
    if spec == "e5":
        from kr.answering import CachedQueryEmbedder
        from router.adapters.local.e5_embedder import E5Embedder
        from router.rerankers.embedding import EmbeddingReranker

        return EmbeddingReranker(CachedQueryEmbedder(E5Embedder()))
    bare_url = kind in ("http", "https") and target.startswith("//")  # a URL, Cohere shape
    if bare_url or (kind in ("http", "tei") and target):
        from router.adapters.http_reranker import HttpReranker

        url = spec if bare_url else target
        return HttpReranker(
            url,
            model=env.get("KR_RERANK_MODEL", ""),
            api_key=env.get("KR_RERANK_API_KEY") or None,
            api="tei" if kind == "tei" else "cohere",
        )
    if kind == "llm" and target:
        from router.adapters.local.openai_generator import OpenAICompatibleGenerator
        from router.rerankers.listwise import LlmListwiseReranker

        model = env.get("KR_LLM_MODEL")
        if not model:
            raise ConfigError("--reranker llm:URL needs the model name in $KR_LLM_MODEL")
        generator = OpenAICompatibleGenerator(target, model, env.get("KR_LLM_API_KEY") or None)
        return LlmListwiseReranker(generator)
    raise ConfigError(
        f"--reranker {spec!r}: choose none, local, e5, http:URL, tei:URL or llm:BASE_URL"
    )
