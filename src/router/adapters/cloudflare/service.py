"""The Worker's wiring: adapters from ``env`` bindings, one :class:`KnowledgeService` per isolate.

Why per isolate: loading a package (R2 reads, decoding) is the expensive part of a cold request,
so the service — with the loaded package, the LRU cache and the active-version TTL — lives in a
module global created by the first request and reused by every later request of the isolate.
Why the embedder is chosen per package: vectors are only comparable with query vectors of the
model that made them, so when a package is loaded its manifest's ``embedding.model`` picks the
embedder (``@cf/...`` → Workers AI, ``hash-trigram-256`` → the pure-Python test embedder); a
package without vectors, or without a usable embedder or index, runs without the vector stage.

Binding names (wrangler.toml): ``KNOWLEDGE_KV``, ``KNOWLEDGE_BUCKET``, ``KNOWLEDGE_DB``,
``KNOWLEDGE_VECTORS``, ``AI``; any may be absent (tests, partial deployments). R2's
content-named files are read through the colo's cache (``caches.default``, docs/adr/0027) unless
``KR_COLO_CACHE=off``. Optional variables: ``KR_ACTIVE_VERSION_TTL_S``, ``KR_CACHE_TTL_S``,
``KR_LLM_MODEL``, ``KR_WARM_LIMIT``.
Credentials and CORS (docs/adr/0012): API keys from D1's ``api_keys``, anonymous access off
unless ``KR_ALLOW_ANONYMOUS=on``, ``KR_KEY_CACHE_TTL_S`` (30 s: how long a revoked key may still
work in an isolate that saw it), ``KR_JWT_HS256_SECRET`` or ``KR_JWKS`` with
``KR_JWT_TENANT_CLAIM``, ``KR_JWT_AUDIENCE``, ``KR_JWT_ISSUER``, and ``KR_CORS_ORIGINS``.
Reranking (docs/adr/0015): off unless ``KR_RERANKER=workers-ai`` (then Workers AI's
``@cf/baai/bge-reranker-base``, English-only, or ``KR_RERANKER_MODEL``, reorders the fused
top-N of queries whose confidence is not HIGH; its answers are cached apart).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

from router.adapters.cloudflare.cache import ColoCachedBlobs
from router.adapters.cloudflare.d1 import (
    D1QueryLog,
    D1QuestionLog,
    D1RecordRows,
    D1RelationalStore,
)
from router.adapters.cloudflare.heap import wasm_heap_bytes
from router.adapters.cloudflare.jsconv import binding, js_global, to_py
from router.adapters.cloudflare.keys import D1KeyStore
from router.adapters.cloudflare.kv import WorkersKV
from router.adapters.cloudflare.r2 import R2BlobStore
from router.adapters.cloudflare.vectorize import VectorizeIndex
from router.adapters.cloudflare.workers_ai import (
    DEFAULT_LLM_MODEL,
    DEFAULT_RERANK_MODEL,
    WorkersAiEmbedder,
    WorkersAiGenerator,
    WorkersAiReranker,
)
from router.api.cors import CorsPolicy, cors_policy_from
from router.api.fair_share import CallerShares, ShareConfig, share_config_from
from router.auth import Authenticator, auth_config_from
from router.config import DEFAULT_CACHE_ENTRIES, RetrievalBudget, RouterConfig
from router.deferral import Defer
from router.errors import ConfigError
from router.namespaced import NamespacedStore, reranker_namespace
from router.ops.query_log import QueryRecorder
from router.ops.questions import LogPolicy, log_policy_from
from router.ops.retention import RetentionReport, apply_retention
from router.ops.warming import DEFAULT_WARM_LIMIT, WarmReport, warm_cache
from router.package.stores.budget import MIB, HeapPlan
from router.package.version.manifest import Manifest
from router.ports import Embedder, KeyValueStore, VectorIndex
from router.service import ACTIVE_VERSION_TTL_S, KnowledgeService, VectorStageFactory
from router.stages.cache import QueryCache
from router.vectors.hash_embedder import HASH_MODEL_ID, HashEmbedder

__all__ = [
    "AI_BINDING",
    "BUCKET_BINDING",
    "CACHE_TTL_S",
    "DB_BINDING",
    "KV_BINDING",
    "LOG_FLUSH_EVERY",
    "LOG_FLUSH_INTERVAL_S",
    "RECORDS_CHOICES",
    "RERANKER_CHOICES",
    "VECTORS_BINDING",
    "CloudflareBindings",
    "WorkerSettings",
    "authenticator_from_env",
    "bindings",
    "build_service",
    "cors_from_env",
    "reset_service",
    "retention_from_env",
    "service_from_env",
    "settings_from_env",
    "shares_from_env",
    "warm_from_env",
]

log = logging.getLogger(__name__)

KV_BINDING = "KNOWLEDGE_KV"
BUCKET_BINDING = "KNOWLEDGE_BUCKET"
DB_BINDING = "KNOWLEDGE_DB"
VECTORS_BINDING = "KNOWLEDGE_VECTORS"
AI_BINDING = "AI"

RERANKER_CHOICES = ("off", "workers-ai")
"""``KR_RERANKER``: no rerank stage (the default), or Workers AI's reranker model."""
RECORDS_CHOICES = ("d1", "objects")
"""``KR_RECORDS``: where a response's document records are read — D1's ``knowledge_records``
in one query (the default), or the package's content-named record chunks (through the colo's
cache); docs/adr/0027 compares them."""

CACHE_TTL_S = 24 * 3600
"""KV expiration of query-cache entries (they are keyed by version and day)."""
DEFAULT_LOG_POLICY = LogPolicy()
"""Questions stored redacted, logs kept ``DEFAULT_LOG_RETENTION_DAYS`` (docs/security.md)."""
LOG_FLUSH_EVERY = 10
LOG_FLUSH_INTERVAL_S = 60.0
"""The Worker writes the query log every 10 queries or 60 s per isolate (one D1 batch)."""


@dataclass
class CloudflareBindings:
    """Adapters over the bindings present in ``env`` (None for each one that is absent).

    Vectorize and Workers AI stay raw: their adapters need the model and dimensions of the
    package being served, which only its manifest knows (:meth:`vector_index`,
    :meth:`embedder`).
    """

    kv: WorkersKV | None = None
    blobs: R2BlobStore | ColoCachedBlobs | None = None
    relational: D1RelationalStore | None = None
    query_log: D1QueryLog | None = None
    question_log: D1QuestionLog | None = None
    record_rows: D1RecordRows | None = None
    vectors_binding: Any = None
    ai_binding: Any = None

    def vector_index(self, dimensions: int) -> VectorizeIndex | None:
        if self.vectors_binding is None:
            return None
        return VectorizeIndex(self.vectors_binding, dimensions)

    def embedder(self, model: str | None, dimensions: int) -> Embedder | None:
        """The query embedder producing ``model`` vectors, or None when none is available."""
        if model == HASH_MODEL_ID:
            return HashEmbedder()
        if model and model.startswith("@cf/") and self.ai_binding is not None:
            return WorkersAiEmbedder(self.ai_binding, model, dimensions)
        return None

    def generator(self, model: str = DEFAULT_LLM_MODEL) -> WorkersAiGenerator | None:
        if self.ai_binding is None:
            return None
        return WorkersAiGenerator(self.ai_binding, model)

    def reranker(self, model: str = DEFAULT_RERANK_MODEL) -> WorkersAiReranker | None:
        """The Workers AI reranker, or None (with a warning) when ``AI`` is not bound."""
        if self.ai_binding is None:
            log.warning("KR_RERANKER=workers-ai but no %s binding: no rerank stage", AI_BINDING)
            return None
        return WorkersAiReranker(self.ai_binding, model)

    def vector_stage(self, manifest: Manifest) -> tuple[Embedder | None, VectorIndex | None]:
        """Embedder and index for a package (a :data:`~router.service.VectorStageFactory`)."""
        embedding = manifest.embedding
        if not embedding:
            return None, None
        model = embedding.get("model")
        dimensions = int(embedding.get("dimensions", 0))
        embedder = self.embedder(model, dimensions)
        index = self.vector_index(dimensions) if embedder is not None else None
        if embedder is None or index is None:
            log.warning(
                "knowledge version %s: no vector stage (model %r, Vectorize %s, AI %s)",
                manifest.knowledge_version,
                model,
                "bound" if self.vectors_binding is not None else "absent",
                "bound" if self.ai_binding is not None else "absent",
            )
            return None, None
        return embedder, index


def bindings(env: Any, defer: Defer | None = None) -> CloudflareBindings:
    """Adapters for the bindings of ``env`` (a Worker env, or any object/mapping in tests).
    R2 is read through the colo's cache (``caches.default``) when the runtime has one, unless
    ``KR_COLO_CACHE=off``; ``defer`` runs the cache's writes after the response."""
    kv = binding(env, KV_BINDING)
    bucket = binding(env, BUCKET_BINDING)
    db = binding(env, DB_BINDING)
    return CloudflareBindings(
        kv=WorkersKV(kv) if kv is not None else None,
        blobs=_blobs(env, bucket, defer) if bucket is not None else None,
        relational=D1RelationalStore(db) if db is not None else None,
        query_log=D1QueryLog(db) if db is not None else None,
        question_log=D1QuestionLog(db) if db is not None else None,
        record_rows=D1RecordRows(db) if db is not None else None,
        vectors_binding=binding(env, VECTORS_BINDING),
        ai_binding=binding(env, AI_BINDING),
    )


def _blobs(env: Any, bucket: Any, defer: Defer | None) -> R2BlobStore | ColoCachedBlobs:
    """R2, behind the colo's cache (docs/adr/0027) when there is one and it is not switched
    off (``KR_COLO_CACHE=off``: on ``*.workers.dev`` the Cache API does nothing)."""
    r2 = R2BlobStore(bucket)
    caches = js_global("caches")
    colo = None if caches is None else getattr(caches, "default", None)
    if colo is None or not _switch(env, "KR_COLO_CACHE", True):
        return r2
    return ColoCachedBlobs(r2, colo, defer)


@dataclass(frozen=True)
class WorkerSettings:
    """Knobs of the Worker service, from ``env`` variables (named defaults otherwise)."""

    active_version_ttl_s: float = ACTIVE_VERSION_TTL_S
    cache_ttl_s: int = CACHE_TTL_S
    cache_entries: int = DEFAULT_CACHE_ENTRIES
    llm_model: str = DEFAULT_LLM_MODEL
    warm_limit: int = DEFAULT_WARM_LIMIT
    log_flush_every: int = LOG_FLUSH_EVERY
    log_flush_interval_s: float = LOG_FLUSH_INTERVAL_S
    max_latency_ms: float = RetrievalBudget().max_latency_ms
    query_log: bool = True  # KR_QUERY_LOG=off: no query text is stored (privacy), no warming
    log_policy: LogPolicy = DEFAULT_LOG_POLICY  # KR_LOG_STORE, KR_LOG_RETENTION_DAYS
    reranker: str = "off"  # KR_RERANKER: off | workers-ai (docs/adr/0015)
    reranker_model: str = DEFAULT_RERANK_MODEL
    records: str = "d1"  # KR_RECORDS: d1 | objects (docs/adr/0027)
    heap: HeapPlan = field(default_factory=HeapPlan)  # KR_HEAP_LIMIT_MIB, KR_HEAP_RESERVE_MIB

    def router_config(self) -> RouterConfig:
        """The cascade's configuration with this Worker's latency budget."""
        budget = dataclasses.replace(RetrievalBudget(), max_latency_ms=self.max_latency_ms)
        return RouterConfig(budget=budget)


def settings_from_env(env: Any) -> WorkerSettings:
    """``KR_ACTIVE_VERSION_TTL_S``, ``KR_CACHE_TTL_S``, ``KR_LLM_MODEL``, ``KR_WARM_LIMIT``,
    ``KR_MAX_LATENCY_MS`` (the retrieval budget: stages past it are skipped, PRD §21),
    ``KR_QUERY_LOG`` (on/off), ``KR_LOG_STORE`` (redacted/terms), ``KR_LOG_RETENTION_DAYS``,
    ``KR_RERANKER`` (off/workers-ai), ``KR_RERANKER_MODEL``, ``KR_RECORDS`` (d1/objects), and
    ``KR_HEAP_LIMIT_MIB`` /
    ``KR_HEAP_RESERVE_MIB`` (how far the wasm heap may grow, and what stays free below that
    for one query: the package's caches get the rest, ``router.package.stores.budget``)."""
    defaults = WorkerSettings()
    limit = _number(env, "KR_HEAP_LIMIT_MIB", defaults.heap.limit_bytes / MIB, float)
    reserve = _number(env, "KR_HEAP_RESERVE_MIB", defaults.heap.reserve_bytes / MIB, float)
    return WorkerSettings(
        active_version_ttl_s=_number(
            env, "KR_ACTIVE_VERSION_TTL_S", defaults.active_version_ttl_s, float
        ),
        cache_ttl_s=_number(env, "KR_CACHE_TTL_S", defaults.cache_ttl_s, int),
        llm_model=str(to_py(binding(env, "KR_LLM_MODEL")) or defaults.llm_model),
        warm_limit=_number(env, "KR_WARM_LIMIT", defaults.warm_limit, int),
        max_latency_ms=_number(env, "KR_MAX_LATENCY_MS", defaults.max_latency_ms, float),
        query_log=_switch(env, "KR_QUERY_LOG", defaults.query_log),
        log_policy=log_policy_from(lambda name: _text(env, name)),
        reranker=_choice(env, "KR_RERANKER", defaults.reranker, RERANKER_CHOICES),
        reranker_model=str(to_py(binding(env, "KR_RERANKER_MODEL")) or defaults.reranker_model),
        records=_choice(env, "KR_RECORDS", defaults.records, RECORDS_CHOICES),
        heap=_heap_plan(limit, reserve),
    )


def _heap_plan(limit_mib: float, reserve_mib: float) -> HeapPlan:
    try:
        return HeapPlan(int(limit_mib * MIB), int(reserve_mib * MIB))
    except ConfigError as exc:
        raise ConfigError(f"KR_HEAP_LIMIT_MIB / KR_HEAP_RESERVE_MIB: {exc.message}") from exc


def build_service(
    cf: CloudflareBindings,
    settings: WorkerSettings | None = None,
    config: RouterConfig | None = None,
) -> KnowledgeService:
    """A service over the bindings: KV-backed LRU cache, active-version TTL, vector stage per
    package, Workers AI generator when ``AI`` is bound (and its reranker when asked for),
    query recording when D1 is bound."""
    settings = settings or WorkerSettings()
    if cf.kv is None or cf.blobs is None:
        missing = [n for n, a in ((KV_BINDING, cf.kv), (BUCKET_BINDING, cf.blobs)) if a is None]
        raise ConfigError(f"the Worker needs the {' and '.join(missing)} binding(s)")
    vector_stage: VectorStageFactory = cf.vector_stage
    recorder = None
    if cf.query_log is not None and settings.query_log:
        recorder = QueryRecorder(
            cf.query_log,
            questions=cf.question_log,
            policy=settings.log_policy,
            flush_every=settings.log_flush_every,
            flush_interval_s=settings.log_flush_interval_s,
        )
    reranker = cf.reranker(settings.reranker_model) if settings.reranker == "workers-ai" else None
    cache_kv: KeyValueStore = cf.kv.with_ttl(settings.cache_ttl_s)
    if reranker is not None:  # reranked answers are cached apart
        cache_kv = NamespacedStore(cache_kv, reranker_namespace(reranker.model))
    return KnowledgeService(
        kv=cf.kv,
        blobs=cf.blobs,
        config=config or settings.router_config(),
        generator=cf.generator(settings.llm_model),
        reranker=reranker,
        cache=QueryCache(settings.cache_entries, cache_kv),
        active_version_ttl_s=settings.active_version_ttl_s,
        vector_stage=vector_stage,
        recorder=recorder,
        question_log=cf.question_log,
        record_rows=cf.record_rows if settings.records == "d1" else None,
        heap_bytes=wasm_heap_bytes,
        heap_plan=settings.heap,
    )


_service: KnowledgeService | None = None


def service_from_env(env: Any, defer: Defer | None = None) -> KnowledgeService:
    """The isolate's service, built from ``env`` on the first call and reused afterwards;
    ``defer`` (the Worker's ``waitUntil``) runs its adapters' writes after a response."""
    global _service
    if _service is None:
        _service = build_service(bindings(env, defer), settings_from_env(env))
    return _service


def reset_service() -> None:
    """Forget the isolate's service and authenticator (tests; a new ``env`` builds new ones)."""
    global _service, _authenticator, _shares
    _service = None
    _authenticator = None
    _shares = None


_authenticator: Authenticator | None = None


def authenticator_from_env(env: Any) -> Authenticator:
    """The isolate's authenticator: keys from D1, JWT settings and anonymous access (off unless
    ``KR_ALLOW_ANONYMOUS=on``) from ``env``; kept so its cache of valid keys lives on."""
    global _authenticator
    if _authenticator is None:
        config = auth_config_from(lambda name: _text(env, name), allow_anonymous=False)
        db = binding(env, DB_BINDING)
        _authenticator = Authenticator(config, D1KeyStore(db) if db is not None else None)
    return _authenticator


_shares: CallerShares | None = None


def shares_from_env(env: Any) -> CallerShares | None:
    """The isolate's per-caller shares of serving time, when ``KR_CALLER_MS_PER_S`` is set (off
    by default here: a Worker request's time includes its waits on KV, R2, D1 and Workers AI,
    which cost the isolate no CPU; Cloudflare's rate limiting rules come first)."""
    global _shares
    if _shares is None:
        config = share_config_from(lambda name: _text(env, name), ShareConfig(ms_per_s=0.0))
        _shares = CallerShares(config)
    return _shares if _shares.config.enabled else None


def cors_from_env(env: Any) -> CorsPolicy:
    """``KR_CORS_ORIGINS``: comma-separated origins or ``*``; none by default."""
    return _cors_policy(_text(env, "KR_CORS_ORIGINS"))


_cors_policies: dict[str | None, CorsPolicy] = {}


def _cors_policy(raw: str | None) -> CorsPolicy:
    policy = _cors_policies.get(raw)
    if policy is None:
        policy = _cors_policies.setdefault(raw, cors_policy_from(raw))
    return policy


def _text(env: Any, name: str) -> str | None:
    raw = to_py(binding(env, name))
    return None if raw is None else str(raw)


async def warm_from_env(
    env: Any, now: float | None = None, defer: Defer | None = None
) -> WarmReport:
    """The scheduled handler's work: write this isolate's pending query counts, then replay
    the most frequent recent queries so the KV query cache holds their answers."""
    service = service_from_env(env, defer)
    if service.recorder is not None:
        await service.recorder.flush()
    query_log = bindings(env).query_log
    if query_log is None:
        return WarmReport(skipped=f"no {DB_BINDING} binding: no query log")
    settings = settings_from_env(env)
    return await warm_cache(
        service,
        query_log,
        settings.warm_limit,
        retention_s=settings.log_policy.retention_s,
        now=now,
    )


async def retention_from_env(env: Any, now: float | None = None) -> RetentionReport:
    """The scheduled handler's other work: delete the logged queries and questions older than
    ``KR_LOG_RETENTION_DAYS`` (:func:`router.ops.retention.apply_retention`)."""
    cf = bindings(env)
    policy = settings_from_env(env).log_policy
    return await apply_retention(cf.query_log, cf.question_log, policy.retention_days, now=now)


def _switch(env: Any, name: str, default: bool) -> bool:
    raw = to_py(binding(env, name))
    if raw is None or raw == "":
        return default
    value = str(raw).strip().lower()
    if value not in ("on", "off", "true", "false", "1", "0"):
        raise ConfigError(f"{name} must be on or off, got {raw!r}")
    return value in ("on", "true", "1")


def _choice(env: Any, name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = to_py(binding(env, name))
    if raw is None or raw == "":
        return default
    value = str(raw).strip().lower()
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
    return value


def _number(env: Any, name: str, default: Any, kind: type) -> Any:
    raw = to_py(binding(env, name))
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from exc
    if value < 0:
        raise ConfigError(f"{name} must not be negative, got {raw!r}")
    return value
