"""The vector fallback in the cascade: when it runs (weak lexical result, ``always_vector``)
and when it is skipped (exact hit, HIGH, disabled, no vectors), tenants kept apart, a query
embedder of another model refused, an out-of-scope question still abstaining."""

from __future__ import annotations

import json

import pytest

from router.adapters.local.vector_index import LocalVectorIndex
from router.config import RouterConfig
from router.errors import EmbeddingModelError
from router.package.reader import KnowledgePackage
from router.pipeline import CascadeServices
from router.vectors.hash_embedder import HASH_MODEL_ID
from tests.cascade.common import (
    EXACT_ID,
    HIGH_LEXICAL,
    LOW_LEXICAL,
    MEDIUM_LEXICAL,
    OUT_OF_SCOPE,
    OtherModelEmbedder,
    cascade,
    ran,
    stage,
)
from tests.common import ALFA, BETA


def test_exact_id_skips_the_vector_stage(
    vpackage: KnowledgePackage, vservices: CascadeServices
) -> None:
    response = cascade(vpackage, EXACT_ID, services=vservices)
    assert stage(response, "vector")["skipped"] == "exact hit"
    assert not response.metadata.fallback_triggered
    assert all("vector" not in r.scores for r in response.results)


def test_high_lexical_confidence_skips_the_vector_stage(
    vpackage: KnowledgePackage, vservices: CascadeServices
) -> None:
    response = cascade(vpackage, HIGH_LEXICAL, services=vservices)
    assert response.confidence_level == "HIGH" and not stage(response, "exact")["hits"]
    assert stage(response, "vector")["skipped"] == "lexical confidence HIGH"
    assert not response.metadata.fallback_triggered


@pytest.mark.parametrize("query", [MEDIUM_LEXICAL, LOW_LEXICAL])
def test_weak_lexical_result_triggers_the_vector_fallback(
    vpackage: KnowledgePackage, vservices: CascadeServices, query: str
) -> None:
    response = cascade(vpackage, query, services=vservices)
    assert stage(response, "confidence")["level"] in ("LOW", "MEDIUM")
    assert ran(response, "vector") and response.metadata.fallback_triggered
    assert stage(response, "vector")["model"] == HASH_MODEL_ID
    assert stage(response, "vector")["matches"]
    assert any("vector" in r.scores for r in response.results)


@pytest.mark.parametrize("query", [EXACT_ID, HIGH_LEXICAL])
def test_always_vector_forces_the_vector_stage(
    vpackage: KnowledgePackage, vservices: CascadeServices, query: str
) -> None:
    response = cascade(vpackage, query, services=vservices, config=RouterConfig(always_vector=True))
    assert ran(response, "vector") and response.metadata.fallback_triggered


def test_vector_fallback_can_be_disabled(
    vpackage: KnowledgePackage, vservices: CascadeServices
) -> None:
    config = RouterConfig(vector_fallback=False)
    response = cascade(vpackage, LOW_LEXICAL, services=vservices, config=config)
    assert stage(response, "vector")["skipped"] == "vector fallback disabled"
    assert not response.metadata.fallback_triggered
    assert response.results  # the lexical result is still served


def test_package_without_vectors_skips_the_vector_stage(
    package: KnowledgePackage, vservices: CascadeServices
) -> None:
    response = cascade(package, LOW_LEXICAL, services=vservices)
    assert stage(response, "vector")["skipped"] == "package has no section vectors"
    assert not response.metadata.fallback_triggered


@pytest.mark.parametrize("tenant", [ALFA, BETA])
def test_cascade_with_vectors_keeps_tenants_apart(
    vpackage: KnowledgePackage, vservices: CascadeServices, tenant: str
) -> None:
    config = RouterConfig(always_vector=True)
    response = cascade(vpackage, LOW_LEXICAL, services=vservices, config=config, tenant=tenant)
    assert ran(response, "vector")
    tenants = {r.tenant for r in response.results}
    assert tenant in tenants and tenants <= {"*", tenant}
    other = BETA if tenant == ALFA else ALFA
    prefix = "metalurgicaBeta" if other == BETA else "construtoraAlfa"
    assert not [m for m in stage(response, "vector")["matches"] if m[0].startswith(prefix)]
    assert other not in json.dumps(response.model_dump(mode="json")["results"])


def test_query_embedder_of_another_model_is_refused(
    vpackage: KnowledgePackage, vindex: LocalVectorIndex
) -> None:
    services = CascadeServices(embedder=OtherModelEmbedder(), vector_index=vindex)
    with pytest.raises(EmbeddingModelError) as raised:
        cascade(vpackage, LOW_LEXICAL, services=services)
    assert raised.value.code == "embedding_model_mismatch"
    assert HASH_MODEL_ID in raised.value.message and "some-other-model" in raised.value.message


def test_out_of_scope_question_still_abstains_with_the_vector_fallback(
    vpackage: KnowledgePackage, vservices: CascadeServices
) -> None:
    response = cascade(vpackage, OUT_OF_SCOPE, services=vservices)
    assert response.metadata.fallback_triggered  # the fallback ran, and found nothing trustworthy
    assert response.abstained and response.results == [] and response.confidence_level == "NONE"
