"""The fetch budget: a query fetches the posting lists of its rarest terms first and leaves the
commonest out past ``RetrievalBudget.max_fetched_postings``, saying so in its trace."""

from __future__ import annotations

from router.config import RetrievalBudget, RouterConfig
from router.contract import QueryRequest
from router.package.reader import KnowledgePackage
from router.pipeline import run_query
from router.ranking.fetch_budget import within_fetch_budget
from tests.common import TODAY, with_terms

QUESTION = "como renovar uma permissão de trabalho vencida no trabalho em altura"


def _terms(package: KnowledgePackage) -> list[str]:
    stage = run_query(package, QueryRequest(query=QUESTION), today=TODAY).trace["stages"]
    return list(stage["analyze"]["terms"])


def test_the_rarest_terms_are_kept_and_the_commonest_left_out(package: KnowledgePackage) -> None:
    terms = _terms(package)
    view = with_terms(package.view(None), terms)
    known = sorted({t for t in terms if view.knows(t)}, key=view.document_frequency)
    assert len(known) >= 3 and terms.count("trabalh") == 2  # a repeated term stays repeated
    blocks = len(view.block_names)
    everything = sum(view.document_frequency(t) for t in known) * blocks
    plan = within_fetch_budget(view, terms, everything)
    assert (plan.scored, plan.heads, plan.left_out) == (terms, [], [])
    plan = within_fetch_budget(view, terms, everything - 1)
    assert plan.left_out == [known[-1]]  # the commonest goes first
    assert plan.scored == [t for t in terms if t != known[-1]]  # order and repeats kept
    plan = within_fetch_budget(view, terms, 1)  # nothing fits: the rarest stays
    assert {t for t in plan.scored if view.knows(t)} == {known[0]}
    assert plan.left_out == known[:0:-1]


def test_a_query_past_the_budget_ranks_on_its_rarest_terms_and_says_so(
    package: KnowledgePackage,
) -> None:
    """Past the budget the BM25 ranking is the one of the question without its commonest
    terms, and the trace names them; within it nothing is said."""
    view = package.view(None)
    loaded = with_terms(view, _terms(package))
    known = sorted({t for t in _terms(package) if loaded.knows(t)}, key=loaded.document_frequency)
    budget = loaded.document_frequency(known[0]) * len(loaded.block_names)  # the rarest alone
    tight = RouterConfig(budget=RetrievalBudget(max_fetched_postings=budget))
    stages = run_query(package, QueryRequest(query=QUESTION), tight, today=TODAY).trace["stages"]
    assert stages["bm25"]["truncated"] is True
    assert stages["bm25"]["terms_left_out"] == known[:0:-1]
    rare_words = " ".join(w for w in QUESTION.split() if view.analyzer.terms(w) == [known[0]])
    alone = run_query(package, QueryRequest(query=rare_words), today=TODAY).trace["stages"]
    assert "truncated" not in alone["bm25"] and "terms_left_out" not in alone["bm25"]
    assert stages["bm25"]["candidates"] == alone["bm25"]["candidates"]
