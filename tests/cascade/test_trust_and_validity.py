"""Trust, UI context and validity in the cascade: drafts demoted, the focused section and
the page lifted, deprecated documents only on request, rules only within their validity,
vectors included."""

from __future__ import annotations

import asyncio
import datetime as dt
import json

import pytest

from router.adapters.local.vector_index import LocalVectorIndex
from router.config import DEFAULT_TRUST_WEIGHTS, RouterConfig
from router.contract import QueryResponse
from router.package.reader import KnowledgePackage
from router.pipeline import CascadeServices
from router.stages.vector import vector_search
from router.vectors.hash_embedder import HashEmbedder
from tests.cascade.common import (
    DEPRECATED_DOC,
    DEPRECATED_QUERY,
    cascade,
    ran,
    stage,
)
from tests.common import with_all_records


def test_trust_weights_demote_drafts_in_the_cascade(package: KnowledgePackage) -> None:
    flat = RouterConfig(trust_weights=dict.fromkeys(DEFAULT_TRUST_WEIGHTS, 1.0))
    query = "investigação de incidentes causas"

    def first_draft(response: QueryResponse) -> int:
        return next(i for i, r in enumerate(response.results) if r.trust == "draft")

    default = cascade(package, query, top_k=10)
    untrusted = cascade(package, query, top_k=10, config=flat)
    assert first_draft(default) > first_draft(untrusted)


def test_focus_lifts_the_focused_section(package: KnowledgePackage) -> None:
    plain = cascade(package, "como trocar o PIN?", top_k=5)
    focused = cascade(package, "como trocar o PIN?", top_k=5, focus="app.page.profile.pin")
    lifted = next(r for r in focused.results if r.section_id == "app.page.profile.pin")
    assert lifted.scores["context"] == RouterConfig().context_boost
    assert all("context" not in r.scores for r in plain.results)


def test_page_lifts_the_sections_of_that_page(package: KnowledgePackage) -> None:
    assert cascade(package, "explique isso", page="profile").results[0].doc_id == "app.page.profile"
    response = cascade(package, "como trocar o PIN?", top_k=5, page="profile")
    boosted_docs = {r.doc_id for r in response.results if "context" in r.scores}
    assert boosted_docs == {"app.page.profile"}


@pytest.mark.parametrize("config", [RouterConfig(), RouterConfig(always_vector=True)])
def test_deprecated_document_only_on_request(
    vpackage: KnowledgePackage, vservices: CascadeServices, config: RouterConfig
) -> None:
    default = cascade(vpackage, DEPRECATED_QUERY, services=vservices, config=config, top_k=50)
    assert all(r.doc_id != DEPRECATED_DOC for r in default.results)
    assert all(r.trust != "deprecated" for r in default.results)
    assert DEPRECATED_DOC not in json.dumps(stage(default, "fusion")["ranking"])
    included = cascade(
        vpackage,
        DEPRECATED_QUERY,
        services=vservices,
        config=config,
        top_k=50,
        include_deprecated=True,
    )
    assert any(r.doc_id == DEPRECATED_DOC for r in included.results)


def test_vector_index_holds_the_deprecated_doc_yet_the_cascade_hides_it(
    vpackage: KnowledgePackage, vindex: LocalVectorIndex
) -> None:
    view = vpackage.view(None)
    found = asyncio.run(vector_search(view, HashEmbedder(), vindex, DEPRECATED_QUERY, None, 50))
    view = with_all_records(view)
    docs = {view.documents[view.section_doc[s]].semantic_id for s, _ in found}
    assert DEPRECATED_DOC in docs  # so the filter, not luck, keeps it out of the answer


@pytest.mark.parametrize(("day", "version"), [("2025-06-10", "1"), ("2026-02-15", "2")])
def test_vectors_never_bring_back_a_rule_outside_its_validity(
    vpackage: KnowledgePackage, vservices: CascadeServices, day: str, version: str
) -> None:
    question = "A cada quantos meses a APR padronizada deve ser revisada?"
    config = RouterConfig(always_vector=True)
    day_asked = dt.date.fromisoformat(day)
    response = cascade(
        vpackage, question, services=vservices, config=config, top_k=50, date=day_asked
    )
    assert ran(response, "vector")
    rule = [r for r in response.results if r.doc_id == "apr.review.rule"]
    assert rule and {r.version for r in rule} == {version}
