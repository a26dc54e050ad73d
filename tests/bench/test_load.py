"""bench/load.py: its attack requests are valid requests, and a tiny run over loopback (1 and 2
clients, one attacker connection) ends with no errors and every figure in place."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from bench.load import (
    ATTACK_KINDS,
    QUESTION_KINDS,
    QUESTION_WORDS,
    attack_query,
    golden_asks,
    main,
    vocabulary,
)

from router.adapters.local.state import LocalState
from router.contract import MAX_QUERY_CHARS, QueryRequest


@pytest.mark.parametrize("kind", ATTACK_KINDS)
def test_attack_requests_are_within_the_limits_and_never_repeat(kind: str) -> None:
    rng, words = random.Random(1), vocabulary()
    first, second = attack_query(kind, rng, words), attack_query(kind, rng, words)
    assert first != second  # never a cache hit
    for query in (first, second):
        assert MAX_QUERY_CHARS - 20 <= len(query) <= MAX_QUERY_CHARS
        QueryRequest(query=query)  # valid: the server does the work, not a 422


@pytest.mark.parametrize("kind", QUESTION_KINDS)
def test_question_attacks_are_60_new_words(kind: str) -> None:
    rng, words = random.Random(1), vocabulary()
    first, second = attack_query(kind, rng, words), attack_query(kind, rng, words)
    assert first != second
    for query in (first, second):
        assert len(query.split()) == QUESTION_WORDS and len(query) <= MAX_QUERY_CHARS
        QueryRequest(query=query)


def test_golden_questions_carry_their_tenant() -> None:
    asks = golden_asks()
    assert len(asks) >= 100
    assert {a.tenant for a in asks if a.tenant} >= {"construtora-alfa", "metalurgica-beta"}
    assert all("tenant" not in a.body or a.body["tenant"] == a.tenant for a in asks)


def test_a_tiny_run_has_no_errors_and_sane_figures(state: LocalState, tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    argv = ["--state", str(state.root), "--modes", "uncached", "--clients", "1", "2",
            "--requests", "12", "--seconds", "5", "--warm-up", "5", "--attack-clients", "1",
            "--attack-requests", "6", "--attack-seconds", "1", "--attack-rounds", "1",
            "--no-profile", "--quiet", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    report = json.loads(out.read_text())
    assert report["conditions"]["commit"] and report["settings"]["tenant_questions"] > 0
    (mode,) = report["modes"]
    assert mode["mode"] == "uncached" and mode["warm_up"]["errors"] == 0
    assert [level["clients"] for level in mode["levels"]] == [1, 2]
    for level in mode["levels"]:
        assert level["errors"] == 0 and level["errors_by_status"] == {}
        assert level["ok"] == level["requests"] == 12
        assert level["throughput_rps"] > 0 and 0 < level["p50_ms"] <= level["p99_ms"]
        assert level["cache"] == {"off": 12}  # the cache is off: every request ran the cascade
        for memory in (level["memory_before"], level["memory_after"]):
            assert 10 < memory["rss_mib"] <= memory["hwm_mib"]
    assert set(mode["attack"]) == set(mode["attack_share_off"]) == {"back_to_back", "paced"}
    for attack in [*mode["attack"].values(), *mode["attack_share_off"].values()]:
        (hostile,) = attack["attacker"]
        assert hostile["requests"] >= 1 and hostile["errors"] == 0
        assert attack["attacked"][0]["errors"] == 0 and attack["alone"][0]["errors"] == 0
        assert attack["p50_ratio"] > 0 and isinstance(attack["meets_target"], bool)
    assert mode["attack"]["paced"]["interval_ms"] > 0
