"""Bounded cost per request (issue 12, item 4): every stage's work has a named bound, long stages
stop at the latency deadline, and a hostile question still gets an answer that says what was cut.

The bounds are asserted as counts (words analysed, spellings checked, candidates, synonyms,
phrases, edges), never as timings; the deadline is forced by a clock the test moves itself.
The figures (CPU and memory of the worst requests) are bench/worst_request.py's.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from router.analysis.analyzer import MAX_QUERY_WORD_CHARS, Analyzer
from router.api.app import create_app
from router.config import (
    DEFAULT_MAX_QUERY_WORDS,
    DEFAULT_MAX_REPAIRED_WORDS,
    DEFAULT_MAX_TYPO_PROBES,
    RetrievalBudget,
    RouterConfig,
)
from router.contract import MAX_QUERY_CHARS, QueryRequest, QueryResponse
from router.errors import ConfigError
from router.package.format import bloom
from router.package.format.postings import decode_postings, encode_postings
from router.package.reader import KnowledgePackage
from router.pipeline import run_query
from router.ranking import pruning as bm25_pruning
from router.ranking.bm25 import block_lists, top_k, weighted_scores
from router.ranking.pruning import weighted_top_k
from router.ranking.result import Ranking
from router.service import KnowledgeService
from router.stages import lexical
from router.stages.exact import MAX_QUERY_IDS, query_keys
from router.stages.graph import expand
from router.stages.normalizer import normalize_query
from router.support import expansion
from router.support.expansion import (
    MAX_CANDIDATES_PER_WORD,
    MAX_SYNONYMS_PER_GROUP,
    RepairLimits,
    SynonymIndex,
    repair_candidates,
    repair_reach,
)
from router.sync import run_sync
from router.trace import NO_DEADLINE, WorkLimit
from tests.common import KNOWLEDGE, TODAY

TYPO_QUESTION = "certifcado de aprovasao do epi"  # two typos; weak until repaired
"""Repaired by the corrective stage: certifc → certific, aprovasa → aprov (golden set)."""
KNOWN_WORDS = ["permissão", "trabalho", "altura", "equipamento", "treinamento", "certificado",
               "validade", "aprovação", "inspeção", "emergência", "ancoragem", "incidente",
               "acidente", "documento", "cadastro", "manutenção"]  # fmt: skip
"""Sixteen words of the sample knowledge, each its own term."""


class ManualClock:
    """A clock that moves only when the test moves it: the deadline passes where it says."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def pass_deadline(self) -> None:
        self.now += 3600.0


def ask(
    package: KnowledgePackage,
    query: str,
    config: RouterConfig | None = None,
    clock: Callable[[], float] | None = None,
) -> QueryResponse:
    request = QueryRequest(query=query)
    if clock is None:
        return run_query(package, request, config, today=TODAY)
    return run_query(package, request, config, today=TODAY, clock=clock)


def stages(response: QueryResponse) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = response.trace["stages"]
    return found


def words(count: int, seed: int = 1, size: int = 8) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choices(string.ascii_lowercase, k=size)) for _ in range(count)]


@pytest.fixture
def probes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts every Bloom filter probe (the typo repair's unit of work)."""
    count = [0]
    original = bloom.BloomFilter.__contains__

    def counted(self: bloom.BloomFilter, key: object) -> bool:
        count[0] += 1
        return original(self, key)

    monkeypatch.setattr(bloom.BloomFilter, "__contains__", counted)
    yield count


# --- configuration --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field",
    [
        "max_query_words",
        "max_repaired_words",
        "max_typo_probes",
        "max_expansion_terms",
        "max_keyword_phrases",
        "max_graph_edges",
    ],
)
def test_each_bound_is_a_checked_config_field(field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        RetrievalBudget(**{field: -1})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=field):
        RetrievalBudget(**{field: "5"})  # type: ignore[arg-type]


# --- analysis: words and their length ---------------------------------------------------------


def test_the_analyzer_reads_at_most_max_query_words(package: KnowledgePackage) -> None:
    question = " ".join(words(400, size=4))
    response = ask(package, question)
    analyze = stages(response)["analyze"]
    assert analyze["truncated"] is True
    assert analyze["words"] == DEFAULT_MAX_QUERY_WORDS
    assert len(analyze["terms"]) <= DEFAULT_MAX_QUERY_WORDS
    bounded = Analyzer().bounded_terms(question, 5)
    assert len(bounded.words) == 5 and bounded.truncated
    assert bounded.terms == Analyzer().terms(" ".join(question.split()[:5]))


def test_a_short_question_is_analysed_as_documents_are(package: KnowledgePackage) -> None:
    """Within the bounds, the query's terms are exactly the build's analysis of the text."""
    analyzer = package.view(None).analyzer
    for question in ("Qual a validade padrão da APR?", "workPermit.validity NR-35 ASOs"):
        bounded = analyzer.bounded_terms(question, DEFAULT_MAX_QUERY_WORDS)
        assert bounded.terms == analyzer.terms(question) and not bounded.truncated


@pytest.mark.parametrize(
    "token",
    [
        "x" * MAX_QUERY_CHARS,
        "ab." * (MAX_QUERY_CHARS // 3),  # one dotted code of 2,000 characters
        "Ab" * (MAX_QUERY_CHARS // 2),  # one camelCase word of 1,000 parts
    ],
    ids=["letters", "dotted", "camel"],
)
def test_an_overlong_token_yields_no_overlong_term(package: KnowledgePackage, token: str) -> None:
    bounded = package.view(None).analyzer.bounded_terms(token, DEFAULT_MAX_QUERY_WORDS)
    assert bounded.truncated
    assert all(len(term) <= MAX_QUERY_WORD_CHARS for term in bounded.terms)
    assert len(bounded.words) <= DEFAULT_MAX_QUERY_WORDS
    response = ask(package, token)
    assert stages(response)["analyze"]["truncated"] is True
    assert response.abstained


def test_a_question_names_at_most_max_query_ids_exact_keys() -> None:
    question = " ".join(f"app.{w}" for w in words(300, size=5))[:MAX_QUERY_CHARS]
    keys = query_keys(normalize_query(question))
    assert len(keys) <= 2 + MAX_QUERY_IDS


# --- typo repair --------------------------------------------------------------------------------


def test_many_typos_repair_at_most_max_repaired_words(package: KnowledgePackage) -> None:
    """Twenty unknown terms: the first ``max_repaired_words`` get candidates, each group at most
    ``MAX_CANDIDATES_PER_WORD``, and the limits say that words were left."""
    view = package.view(None)
    terms = [w + "ca" for w in words(20, size=6)]
    found, _ = run_sync(view.load_terms(terms))
    view = view.with_terms(found)
    limits = RepairLimits(max_words=3, probes_left=10**6)
    candidates = repair_candidates(view, terms, {}, limits)
    assert limits.truncated
    assert set(candidates.by_term) <= set(terms[:3])
    assert all(len(group) <= MAX_CANDIDATES_PER_WORD for group in candidates.by_term.values())


def test_the_spellings_checked_stop_at_max_typo_probes(package: KnowledgePackage) -> None:
    """A word is checked whole or not at all: the probes never exceed the bound, and the repair
    stops at the first word that does not fit."""
    view = package.view(None)
    terms = ["equipamnet", "treinamnet", "certificadx"]
    found, _ = run_sync(view.load_terms(terms))
    view = view.with_terms(found)
    counted = []

    def holds(term: str) -> bool:
        counted.append(term)
        return view.may_know(term)

    alphabet = expansion.term_alphabet(view)
    one_word = len(expansion._edits("equipamnet", alphabet))
    limits = RepairLimits(max_words=10, probes_left=one_word + 10)
    assert limits.check(expansion._edits("equipamnet", alphabet), holds)
    assert limits.check(expansion._edits("treinamnet", alphabet), holds) is None
    assert limits.probes == one_word and len(counted) <= one_word
    assert limits.stopped and limits.truncated


def test_a_hostile_question_checks_at_most_max_typo_probes_spellings(
    package: KnowledgePackage, probes: list[int]
) -> None:
    """Sixteen known words and sixteen long misspelled ones (a repair could cover the question,
    so it runs): the whole request probes the Bloom filters at most ``max_typo_probes`` times
    (plus the few of its own words), and the trace says so."""
    typos = [w[:-1] + "x" + w[-1] for w in words(16, seed=3, size=12)]
    question = " ".join(w for pair in zip(KNOWN_WORDS, typos, strict=True) for w in pair)
    assert len(question) <= MAX_QUERY_CHARS
    probes[0] = 0
    response = ask(package, question)
    corrective = stages(response)["corrective"]
    assert corrective["truncated"] is True and "repair" not in corrective
    assert corrective["typo_probes"] <= DEFAULT_MAX_TYPO_PROBES
    assert probes[0] <= DEFAULT_MAX_TYPO_PROBES + 4 * DEFAULT_MAX_QUERY_WORDS


@pytest.mark.parametrize("kind", ["random", "misspelt"])
def test_a_question_of_mostly_unknown_words_is_not_repaired(
    package: KnowledgePackage, probes: list[int], kind: str
) -> None:
    """Sixty random or misspelt words (issue 31, finding 8): no repair could lift its coverage
    to ``min_coverage``, so no spelling is generated — the whole request probes the filters no
    more than its own words could (a few per word), not ``max_typo_probes`` — and the trace says
    why (``repair: skipped`` and the coverage it could at most reach)."""
    if kind == "random":
        question = " ".join(words(60, seed=5, size=7))
    else:  # two letters swapped in each of 60 words of the sample knowledge
        corpus = sorted(set(re.findall(r"[a-zà-ÿ]{7,}", " ".join(
            path.read_text(encoding="utf-8").lower() for path in KNOWLEDGE.rglob("*.md")
        ))))  # fmt: skip
        sample = random.Random(5).sample(corpus, 60)
        question = " ".join(w[:2] + w[3] + w[2] + w[4:] for w in sample)
    probes[0] = 0
    corrective = stages(ask(package, question))["corrective"]
    assert corrective["repair"] == "skipped"
    assert corrective["reach"] < RouterConfig().min_coverage
    assert "typo_probes" not in corrective and "corrections" not in corrective
    assert probes[0] <= 4 * DEFAULT_MAX_QUERY_WORDS


def test_the_synonyms_of_a_mostly_unknown_question_are_tried_only_if_they_could_serve_it(
    package: KnowledgePackage,
) -> None:
    """Two synonym phrases among random words: the repair is skipped, and so is the synonym
    retry when, all of them matched, the question would still be under ``min_coverage`` (with
    the defaults, always when the repair is: ``max_expansion_terms`` ≤ 2 × ``max_repaired_words``);
    one whose synonyms could lift it keeps its retry (no repair at all here, to show it)."""
    hopeless = stages(ask(package, " ".join(["APR", "EPI", *words(40, seed=9, size=7)])))
    corrective = hopeless["corrective"]
    assert corrective["repair"] == corrective["synonym_retry"] == "skipped"
    assert corrective["changed"] is False and "bm25_expanded" not in hopeless
    no_repair = RouterConfig(budget=RetrievalBudget(max_repaired_words=0))
    question = " ".join(["APR", "EPI", *words(8, seed=9, size=7)])
    served = stages(ask(package, question, no_repair))
    assert (
        served["corrective"]["repair"] == "skipped" and "synonym_retry" not in served["corrective"]
    )
    assert served["corrective"]["changed"] is True and "bm25_expanded" in served


def test_the_reach_of_a_repair_counts_what_the_bounds_let_it_correct() -> None:
    """Known terms, plus at most ``max_words`` stem-level and ``max_words`` surface corrections,
    over the question's distinct terms."""
    assert repair_reach(["a", "b", "b", "c"], ["c"], 4) == 1.0
    assert repair_reach(["a", "x", "y", "z"], ["x", "y", "z", "w"], 1) == 0.75
    assert repair_reach([f"t{i}" for i in range(32)], [f"t{i}" for i in range(31)], 4) == 9 / 32
    assert repair_reach([], [], 4) == 0.0


def test_a_misspelled_question_is_still_repaired_within_the_bounds(
    package: KnowledgePackage,
) -> None:
    """The bounds hold the golden set's typos: both words of ``TYPO_QUESTION`` are repaired."""
    corrective = stages(ask(package, TYPO_QUESTION))["corrective"]
    assert corrective["corrections"] == {"certifc": "certific", "aprovasa": "aprov"}
    assert corrective["kept"] and "truncated" not in corrective
    assert DEFAULT_MAX_REPAIRED_WORDS >= 2


# --- synonyms -----------------------------------------------------------------------------------


def test_synonyms_are_bounded_per_group_and_in_all(package: KnowledgePackage) -> None:
    index = SynonymIndex(package.view(None))
    big = [("a",), *[(f"s{i}",) for i in range(30)]]
    index.groups = [big, [("b",), *[(f"t{i}",) for i in range(30)]], [("c",), ("u",)]]
    added = index.expand(["a", "b", "c"], max_terms=12)
    assert len(added) == 12
    assert sum(term.startswith("s") for term in added) == MAX_SYNONYMS_PER_GROUP
    assert index.expand(["c"], max_terms=12) == ["u"]
    assert index.expand(["a"], max_terms=0) == []


# --- keyword phrases ----------------------------------------------------------------------------


def test_keyword_phrases_stop_at_their_bound(package: KnowledgePackage) -> None:
    question = "Qual a validade padrão da APR?"
    assert stages(ask(package, question))["keyword"]["matches"]
    config = RouterConfig(budget=RetrievalBudget(max_keyword_phrases=0))
    keyword = stages(ask(package, question, config))["keyword"]
    assert keyword["truncated"] is True and keyword["matches"] == []


# --- graph --------------------------------------------------------------------------------------


def test_the_graph_walks_at_most_max_graph_edges() -> None:
    class Hub:
        def neighbours(self, section: int) -> dict[int, str]:
            return {n: "link" for n in range(1, 1001)} if section == 0 else {}

    limit = WorkLimit(50)
    found = expand(Hub(), [(0, 1.0)], None, depth=2, max_nodes=100, limit=limit)
    assert limit.truncated and limit.spent == 50
    assert [s for s, _, _ in found] == list(range(1, 51))
    assert len(expand(Hub(), [(0, 1.0)], None, depth=1, max_nodes=7)) == 7


def test_the_graph_stage_reports_its_edge_bound(package: KnowledgePackage) -> None:
    question = "Qual a validade padrão da APR?"
    assert len(stages(ask(package, question))["graph"]["nodes"]) > 1
    config = RouterConfig(budget=RetrievalBudget(max_graph_edges=1))
    graph = stages(ask(package, question, config))["graph"]
    assert graph["truncated"] is True and len(graph["nodes"]) <= 1


def test_the_graph_walk_stops_at_the_deadline() -> None:
    class Chain:
        def neighbours(self, section: int) -> dict[int, str]:
            return {section + 1: "link"}

    ticks = iter([False, False, True])  # asked before levels 2, 3 and 4, never before the 1st
    limit = WorkLimit(10**6, lambda: next(ticks, True))
    found = expand(Chain(), [(0, 1.0)], None, depth=10, max_nodes=10, limit=limit)
    assert limit.timed_out and [s for s, _, _ in found] == [1, 2, 3]
    limit = WorkLimit(10**6, lambda: True)  # spent before the walk: the first level still runs
    found = expand(Chain(), [(0, 1.0)], None, depth=10, max_nodes=10, limit=limit)
    assert limit.timed_out and [s for s, _, _ in found] == [1]


# --- the deadline inside long stages ------------------------------------------------------------


def test_a_deadline_during_the_typo_repair_stops_it_and_the_answer_says_so(
    package: KnowledgePackage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The clock passes the deadline while the repair generates its second word's spellings:
    the repair stops there, no retry starts, graph and vectors are skipped, and an answer still
    comes back from what the first pass found (here: too weak, an abstention), with the cut in
    its trace."""
    clock = ManualClock()
    original = expansion._edits
    calls = []

    def slow_edits(word: str, alphabet: str) -> list[str]:
        calls.append(word)
        if len(calls) == 2:
            clock.pass_deadline()
        return original(word, alphabet)

    monkeypatch.setattr(expansion, "_edits", slow_edits)
    response = ask(package, TYPO_QUESTION, clock=clock)
    trace = stages(response)
    corrective = trace["corrective"]
    assert corrective["budget_exceeded"] is True
    assert len(calls) == 2  # the third word was never started
    assert "bm25_corrected" not in trace and "bm25_expanded" not in trace
    assert "budget" in trace["graph"]["skipped"]
    assert "latency in corrective" in response.metadata.budget_exceeded
    assert response.trace["budget"]["exceeded"] == response.metadata.budget_exceeded
    assert response.answer and response.abstained  # the unrepaired first pass is too weak


def test_without_a_deadline_the_same_question_is_repaired(package: KnowledgePackage) -> None:
    clock = ManualClock()  # never moves: the budget is never spent
    response = ask(package, TYPO_QUESTION, clock=clock)
    assert stages(response)["corrective"]["kept"] is True
    assert response.metadata.budget_exceeded == []


def _long_lists() -> tuple[dict[str, Any], list[int]]:
    size = 4000
    indptr, ids, scores = [0], [], []
    rng = random.Random(4)
    for _ in range(3):
        members = sorted(rng.sample(range(size), 3000))
        ids += members
        scores += [rng.choice([0.5, 1.0, 1.5, 2.0]) for _ in members]
        indptr.append(len(ids))
    return {"a": decode_postings(encode_postings(indptr, ids, scores, size))}, [0, 1, 2]


def test_the_pure_bm25_scorer_stops_between_windows_at_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Window by window (a long query), the deadline is asked after each window: never before
    the first, so a question always gets the complete scores of what was read; without it the
    ranking is exhaustive scoring's."""
    monkeypatch.setattr(bm25_pruning, "WINDOW_POSTINGS", 500)
    blocks, ids = _long_lists()
    lists = block_lists(blocks, ids, {"a": 1.0})
    exact = weighted_top_k(lists, 10, deadline=NO_DEADLINE)
    assert exact.ranked == top_k(weighted_scores(lists), 10) and not exact.timed_out
    asked = []

    def deadline() -> bool:
        asked.append(True)
        return True

    cut = weighted_top_k(lists, 10, deadline=deadline)
    assert cut.timed_out and cut.truncated and len(asked) == 1
    assert cut.ranked and cut.postings < exact.postings
    complete = weighted_scores(lists)
    assert all(complete[section] == score for section, score in cut.ranked)


def test_one_long_list_stops_between_its_steps_at_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bm25_pruning, "ACCUMULATE_STEP", 100)
    monkeypatch.setattr(bm25_pruning, "SMALL_QUERY_POSTINGS", 0)
    blocks, _ = _long_lists()
    lists = block_lists(blocks, [0], {"a": 1.0})
    cut = weighted_top_k(lists, 5, deadline=lambda: True)
    assert cut.timed_out and cut.truncated and cut.postings == 100 and cut.ranked


def test_a_bm25_ranking_stopped_by_the_deadline_is_flagged_in_the_trace(
    package: KnowledgePackage, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = lexical.served_terms_top_k

    def timed_out(*args: Any, **kwargs: Any) -> Ranking:
        ranking = served(*args, **kwargs)
        return Ranking(ranking.ranked, True, ranking.postings, True)

    monkeypatch.setattr(lexical, "served_terms_top_k", timed_out)
    response = ask(package, "Qual a validade padrão da APR?")
    bm25 = stages(response)["bm25"]
    assert bm25["budget_exceeded"] is True and bm25["truncated"] is True
    assert "latency in bm25" in response.metadata.budget_exceeded
    assert response.results


# --- end to end: hostile questions over HTTP --------------------------------------------------

HOSTILE = {
    "token 2,000 letters": "q" * MAX_QUERY_CHARS,
    "400 random words": " ".join(words(400, size=4)),
    "many distinct typos": " ".join(w + "çã" for w in words(150, seed=2, size=9))[:MAX_QUERY_CHARS],
    "dotted ids": " ".join(f"a.{w}.b" for w in words(250, seed=5, size=3))[:MAX_QUERY_CHARS],
    "emoji and CJK": ("🔥⚠️ 中文字符 " * 300)[:MAX_QUERY_CHARS],
    "digits": "1234567890" * (MAX_QUERY_CHARS // 10),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_question_gets_a_200_with_its_cuts_traced(
    service: KnowledgeService, name: str
) -> None:
    client = TestClient(create_app(service))
    response = client.post("/v1/query", json={"query": HOSTILE[name]})
    assert response.status_code == 200
    body = response.json()
    trace = body["trace"]["stages"]
    assert trace["analyze"].get("truncated") is True or len(HOSTILE[name].split()) < 32
    assert len(trace["analyze"]["terms"]) <= 3 * DEFAULT_MAX_QUERY_WORDS
    corrective = trace.get("corrective", {})
    assert corrective.get("typo_probes", 0) <= DEFAULT_MAX_TYPO_PROBES
