"""Stage — corrective expansion: typo repair over the vocabulary the view can read."""

from __future__ import annotations

import pytest

from router.config import RouterConfig
from router.contract import QueryRequest
from router.package.format.fields import BM25F_BLOCK
from router.package.reader import KnowledgePackage
from router.pipeline import run_query
from router.ranking.bm25 import query_lists
from router.support.expansion import SynonymIndex, expand_terms, repair_candidates, surface_stems
from router.sync import run_sync
from tests.common import TODAY, with_terms


def test_surface_correction_never_touches_known_words_codes_or_short_words(
    package: KnowledgePackage,
) -> None:
    view = package.view(None)
    stems = run_sync(surface_stems(view, ["equipamento", "nr35x", "apr", "equipamneto"]))
    assert "equipamento" not in stems  # a corpus word is not a typo
    assert "nr35x" not in stems  # codes are names
    assert "apr" not in stems  # too short to correct safely
    assert "equip" in stems["equipamneto"]


def test_a_sound_alike_word_is_repaired_through_two_reads_of_the_word_chunks(
    package: KnowledgePackage,
) -> None:
    """The word and its sound key first, then the candidate words; counted per read."""
    view = package.view(None)
    reads = []
    original = view.look_up_words

    async def counted(keys):  # type: ignore[no-untyped-def]
        found, cost = await original(keys)
        reads.append(cost)
        return found, cost

    view.look_up_words = counted  # type: ignore[method-assign]
    stems = run_sync(surface_stems(view, ["calibrassão"]))
    assert stems["calibrassão"] == set(view.analyzer.terms("calibração"))
    assert len(reads) == 2


def test_a_stem_typo_is_repaired_from_the_few_candidates_the_filters_let_through(
    package: KnowledgePackage,
) -> None:
    """ "permisao" → the stem "permissa" is unknown; its one-edit spellings are filtered by the
    partitions' Bloom filters, only those are read, and the commonest known one wins."""
    view = package.view(None)
    terms = view.analyzer.terms("permisão de trabalho")
    found, _ = run_sync(view.load_terms(terms))
    view = view.with_terms(found)
    unknown = [t for t in terms if not view.knows(t)]
    assert unknown, terms
    candidates = repair_candidates(view, terms, {})
    group = candidates.by_term[unknown[0]]
    assert 0 < len(group) < 40  # of hundreds of edits, the filter lets through a few
    found, reads = run_sync(view.load_terms(candidates.terms()))
    view = view.with_terms(found)
    assert reads.round_trips <= 1
    expansion = expand_terms(view, terms, candidates, SynonymIndex(view))
    corrected = expansion.corrections[unknown[0]]
    assert view.knows(corrected) and corrected in group
    assert view.analyzer.terms("permissão")[0] == corrected


def test_overlong_tokens_are_not_repaired(package: KnowledgePackage) -> None:
    """A 2,000-letter token has 108k one-edit spellings: repairing it cost 6 s and 227 MiB of
    one request; no word is that long, so none are generated."""
    view = package.view(None)
    token = "equipamneto" * 200
    found, _ = run_sync(view.load_terms([token]))
    view = view.with_terms(found)
    assert repair_candidates(view, [token], {}).by_term == {}
    assert run_sync(surface_stems(view, [token])) == {}
    assert run_sync(surface_stems(view, ["equipamneto"]))  # a word-sized typo still is


# --- synonyms weigh less than the question's own words (issue 13, item 3) ----------------------


def test_a_synonym_term_weighs_less_in_the_posting_lists(package: KnowledgePackage) -> None:
    view = with_terms(package.view(None), ["apr", "aprov"])
    run_sync(view.load_postings(["apr", "aprov"]))
    weights = {BM25F_BLOCK: 1.0}
    plain = query_lists(view, ["aprov", "apr"], weights, "lucene")
    scaled = query_lists(view, ["aprov", "apr"], weights, "lucene", None, {"apr": 0.5})
    assert len(plain) == len(scaled) == 2
    assert scaled[0][2] == plain[0][2]  # the user's own term is untouched
    assert scaled[1][2] == pytest.approx(plain[1][2] * 0.5)


def test_a_synonym_group_does_not_outvote_the_words_of_the_question(
    package: KnowledgePackage,
) -> None:
    """The APR group adds "análise preliminar de risco" to a question about approving one APR;
    at full weight those three terms pulled it to the general APR document (knowledge-format:
    a synonym matches "at a lower weight than an exact term")."""
    query = QueryRequest(query="aprovação da APR 5512")
    assert run_query(package, query, today=TODAY).results[0].doc_id == "apr.approval"
    full_weight = RouterConfig(synonym_weight=1.0)  # the weight before the fix
    assert run_query(package, query, full_weight, TODAY).results[0].doc_id == "apr"
