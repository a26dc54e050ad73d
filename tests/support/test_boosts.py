"""Stage — boosts: trust weights and the context boost."""

from __future__ import annotations

import pytest

from router.config import DEFAULT_TRUST_WEIGHTS
from router.package.reader import KnowledgePackage
from router.support.boosts import boost_factors, boosted


def test_official_beats_draft_at_equal_score(package: KnowledgePackage) -> None:
    view = package.view(None)
    trust = {i: view.doc_trust(d) for i, d in enumerate(view.section_doc)}
    draft = next(i for i, t in trust.items() if t == "draft")
    official = next(i for i, t in trust.items() if t == "official" and i > draft)
    factors = boost_factors(view, [draft, official], DEFAULT_TRUST_WEIGHTS, set(), 0.3)
    assert factors == {draft: DEFAULT_TRUST_WEIGHTS["draft"], official: 1.0}
    ranked = boosted([(draft, 1.0), (official, 1.0)], factors)
    assert [s for s, _ in ranked] == [official, draft]  # draft has the lower index: not a tie-break
    in_context = boost_factors(view, [draft], DEFAULT_TRUST_WEIGHTS, {draft}, 0.3)
    assert in_context[draft] == pytest.approx(DEFAULT_TRUST_WEIGHTS["draft"] * 1.3)


def test_trust_order_is_official_verified_generated_draft_deprecated() -> None:
    order = ["official", "verified", "generated", "draft", "deprecated"]
    weights = [DEFAULT_TRUST_WEIGHTS[t] for t in order]
    assert weights == sorted(weights, reverse=True) and len(set(weights)) == len(weights)
