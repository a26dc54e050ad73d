"""Answer queries from one loaded package, outside the service: what evaluation and the gate run.

Why not the service: the service answers from whatever version KV says is active; evaluating a
candidate (a folder from ``kr build --out``) and the active version side by side needs two
packages answering at once, each with its own vector index and query embedder.

Why a latency budget of "never" by default: the cascade skips the graph and vector stages once
a query has spent its budget (PRD §21), so on a loaded machine the same package could rank
differently from one run to the next. Quality is measured with the budget lifted, so a gate
verdict depends on the package and not on the machine's load; latency is reported beside it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kr.evaluation import Answerer
from router.adapters.local.embedders import embedder_for_model
from router.adapters.local.state import LocalState
from router.adapters.local.vector_index import LocalVectorIndex
from router.compile.vector_cache import VectorCache
from router.config import RouterConfig
from router.contract import QueryRequest, QueryResponse
from router.errors import ConfigError, NoActiveVersionError
from router.package.fetch import fetch_package_files
from router.package.manifest import MANIFEST_NAME
from router.package.reader import KnowledgePackage
from router.pipeline import CascadeServices, run_cascade
from router.ports import ACTIVE_VERSION_KEY, BlobStore, KeyValueStore
from router.publisher import read_package
from router.service import KnowledgeService
from router.stages.cache import QueryCache
from router.sync import run_sync
from router.vectors.records import section_records

__all__ = [
    "EVAL_CACHE_ENTRIES",
    "UNBOUNDED_LATENCY_MS",
    "CachedQueryEmbedder",
    "active_package",
    "eval_config",
    "full_loader",
    "package_answerer",
    "package_folder_files",
    "read_package_folder",
    "stored_package",
]

UNBOUNDED_LATENCY_MS = 1e9
EVAL_CACHE_ENTRIES = 4096
"""A fresh in-memory LRU per evaluation: repeated queries in a set are served from it (so the
cache hit rate is the set's repetition rate), and nothing leaks in from earlier runs or KV."""


class CachedQueryEmbedder:
    """A local embedder's query vectors through the on-disk vector cache.

    Why: e5-small loads in seconds and embeds ~60 short texts/s on two cores; evaluation and
    the gate ask the same queries again and again, so each is embedded once, ever.
    """

    def __init__(self, encoder: Any, cache_root: Path | None = None) -> None:
        self.encoder = encoder
        self.model_id: str = encoder.model_id
        self.dimensions: int = encoder.dimensions
        self.cache = VectorCache(encoder.model_id, encoder.dimensions, cache_root)

    async def embed(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        rows = self.cache.embed(
            kind, list(texts), lambda batch: np.asarray(self.encoder.encode(batch, kind))
        )
        return [list(map(float, row)) for row in np.asarray(rows)]


def eval_config(base: RouterConfig | None = None) -> RouterConfig:
    """``base`` (default: the tuned defaults) with the latency budget lifted (see module doc)."""
    base = base or RouterConfig()
    budget = dataclasses.replace(base.budget, max_latency_ms=UNBOUNDED_LATENCY_MS)
    return dataclasses.replace(base, budget=budget)


def package_answerer(
    package: KnowledgePackage,
    config: RouterConfig | None = None,
    *,
    encoder: Any = None,
    use_vectors: bool = True,
    cache: bool = True,
    today: str | None = None,
) -> Answerer:
    """An answerer over ``package``: its own vector index (when the package has vectors and a
    matching local embedder exists), a fresh memory cache, ``config`` (default: ``eval_config``).

    ``encoder`` overrides the embedder picked from the manifest's model id (BEIR runs pass the
    one they built the vectors with)."""
    config = config or eval_config()
    embedder = None
    index = None
    if use_vectors and package.vectors is not None and package.manifest.embedding:
        encoder = encoder or embedder_for_model(package.manifest.embedding.get("model"))
        if encoder is not None:
            embedder = CachedQueryEmbedder(encoder)
            index = LocalVectorIndex(package.vectors.dimensions)
            index.upsert_many(section_records(package))
    services = CascadeServices(
        embedder=embedder,
        vector_index=index,
        cache=QueryCache(EVAL_CACHE_ENTRIES) if cache else None,
    )

    async def answer(request: QueryRequest) -> QueryResponse:
        return await run_cascade(package, request, config, services, today=today)

    return answer


def package_folder_files(folder: Path) -> dict[str, bytes]:
    """The files of a package written by ``kr build --out DIR``: ``DIR/<version>/`` or ``DIR``."""
    if not folder.is_dir():
        raise ConfigError(f"package folder {folder} does not exist")
    if not (folder / MANIFEST_NAME).is_file():
        versions = sorted(p for p in folder.iterdir() if (p / MANIFEST_NAME).is_file())
        if len(versions) != 1:
            listed = ", ".join(p.name for p in versions)
            hint = f"; it holds {listed}: pass one of them" if versions else ""
            raise ConfigError(f"{folder} is not a package folder (no {MANIFEST_NAME}){hint}")
        folder = versions[0]

    async def get(name: str) -> bytes | None:
        path = folder / name
        return path.read_bytes() if path.is_file() else None

    return run_sync(fetch_package_files(get, f"package folder {folder}"))


def read_package_folder(folder: Path) -> KnowledgePackage:
    """A package folder, loaded and verified against its manifest."""
    return read_package(package_folder_files(folder))


def full_loader(kv: KeyValueStore, blobs: BlobStore) -> KnowledgeService:
    """A service used only to load (and verify) stored versions whole, section vectors
    included: evaluation fills an in-process vector index from them."""
    return KnowledgeService(kv=kv, blobs=blobs, load_vectors_on_activation=True)


async def stored_package(state: LocalState, version: str) -> KnowledgePackage:
    """A version already published to the local state (verified against its manifest)."""
    return await full_loader(state.kv, state.blobs).load(version)


async def active_package(state: LocalState) -> KnowledgePackage:
    """The version active in the local state."""
    version = await state.kv.get(ACTIVE_VERSION_KEY)
    if not version:
        raise NoActiveVersionError(
            f"no knowledge version is active in {state.root}: run `kr build` first"
        )
    return await stored_package(state, version)
