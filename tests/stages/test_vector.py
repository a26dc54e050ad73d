"""Stage — vector search: tenant isolation and ranking over the in-process index."""

from __future__ import annotations

import asyncio

import pytest

from router.adapters.local.vector_index import LocalVectorIndex
from router.package.reader import KnowledgePackage
from router.package.view import PackageView
from router.stages.vector import vector_search
from router.vectors.hash_embedder import HashEmbedder
from tests.common import ALFA, BETA, with_all_records


def doc_tenant(package: PackageView, section: int) -> str:
    return with_all_records(package).documents[package.section_doc[section]].tenant


@pytest.mark.parametrize(
    ("tenant", "query"),
    [
        (ALFA, "procedimento OBF de bloqueio do forno de indução"),  # Beta's own procedure
        (BETA, "regra do Cartão Verde para andaime fachadeiro"),  # Alfa's own rule
        (None, "procedimento OBF de bloqueio do forno de indução"),
    ],
)
def test_vector_search_never_reaches_another_tenants_sections(
    vpackage: KnowledgePackage, vindex: LocalVectorIndex, tenant: str | None, query: str
) -> None:
    view = vpackage.view(tenant)
    found = asyncio.run(vector_search(view, HashEmbedder(), vindex, query, tenant, 50))
    assert len(found) == 50
    assert {doc_tenant(view, s) for s, _ in found} <= {"*", tenant}


@pytest.mark.parametrize(
    ("tenant", "query"),
    [
        (BETA, "procedimento OBF de bloqueio do forno de indução"),
        (ALFA, "regra do Cartão Verde para andaime fachadeiro"),
    ],
)
def test_vector_search_finds_the_asking_tenants_own_sections(
    vpackage: KnowledgePackage, vindex: LocalVectorIndex, tenant: str, query: str
) -> None:
    view = vpackage.view(tenant)
    found = asyncio.run(vector_search(view, HashEmbedder(), vindex, query, tenant, 10))
    assert doc_tenant(view, found[0][0]) == tenant
    assert [score for _, score in found] == sorted((score for _, score in found), reverse=True)
