"""bench/edge_model.py's replay arithmetic on hand-made schedules: sequential and overlapped
calls, the six-connection limit, body transfers, the isolate's CPU between events, and the
JSON object the checks read."""

from __future__ import annotations

from typing import Any

import pytest
from bench.edge_model import (
    CONNECTION_LIMIT,
    STATES,
    chain,
    figure,
    model,
    replay,
)

R2 = {"binding": "KNOWLEDGE_BUCKET", "cls": "R2Bucket", "op": "get"}
D1 = {"binding": "KNOWLEDGE_DB", "cls": "D1Database", "op": "all"}
KV = {"binding": "KNOWLEDGE_KV", "cls": "KvNamespace", "op": "get"}


class Schedule:
    """Events on a clock where the isolate's CPU equals the wall time unless told otherwise."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.t = 0.0
        self.cpu_us = 0.0
        self.host_us = 0.0

    def _note(self, event: dict[str, Any]) -> None:
        self.events.append({**event, "t": self.t, "cpu": self.cpu_us, "host": self.host_us})

    def work(self, ms: float, host_ms: float = 0.0) -> Schedule:
        self.t += ms
        self.cpu_us += ms * 1e3
        self.host_us += host_ms * 1e3
        return self

    def wait(self, ms: float, cpu_ms: float = 0.0) -> Schedule:
        """Idle time (CPU spent in the gap is the host's proxies finishing a call)."""
        self.t += ms
        self.cpu_us += cpu_ms * 1e3
        return self

    def issue(self, call_id: int, call: dict[str, Any], **extra: Any) -> Schedule:
        self._note({"kind": "issue", "id": call_id, **call, **extra})
        return self

    def settle(self, call_id: int, size: int = 0, **extra: Any) -> Schedule:
        self._note({"kind": "settle", "id": call_id, "bytes": size, **extra})
        return self

    def done(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "end_ms": self.t,
            "end_cpu_us": self.cpu_us,
            "end_host_us": self.host_us,
        }


R2_MS = figure("r2_get", "typical")
D1_MS = figure("d1_query", "typical")


def test_sequential_calls_add_their_round_trips() -> None:
    s = Schedule().work(1).issue(1, R2).wait(8).settle(1).work(1).issue(2, R2).wait(8).settle(2)
    result = replay(s.work(1).done(), "typical", colo_warm=False)
    assert result.ms == pytest.approx(3 + 2 * R2_MS)
    assert result.round_trips == 2
    assert result.cpu_ms == pytest.approx(3)


def test_overlapped_calls_cost_one_round_trip() -> None:
    s = Schedule().work(1).issue(1, R2).work(0.5).issue(2, D1).wait(8).settle(1).settle(2)
    result = replay(s.work(1).done(), "typical", colo_warm=False)
    assert result.ms == pytest.approx(1 + max(R2_MS, 0.5 + D1_MS) + 1)
    assert result.round_trips == 1


def test_a_seventh_connection_waits_for_one_of_six() -> None:
    def burst(call: dict[str, Any], count: int) -> dict[str, Any]:
        s = Schedule()
        for number in range(count):
            s.issue(number, call)
        s.wait(5)
        for number in range(count):
            s.settle(number)
        return s.done()

    assert replay(burst(R2, CONNECTION_LIMIT), "typical", False).ms == pytest.approx(R2_MS)
    assert replay(burst(R2, CONNECTION_LIMIT + 1), "typical", False).ms == pytest.approx(2 * R2_MS)
    assert replay(burst(R2, 2 * CONNECTION_LIMIT + 1), "typical", False).ms == pytest.approx(
        3 * R2_MS
    )
    # D1 is not among the bindings the platform limits list
    assert replay(burst(D1, CONNECTION_LIMIT + 1), "typical", False).ms == pytest.approx(D1_MS)


def test_a_body_read_costs_its_transfer_not_a_round_trip() -> None:
    size = 2_000_000
    s = Schedule().issue(1, R2).wait(3).settle(1, size, headers_only=True)
    s.issue(2, {**R2, "op": "body.arrayBuffer", "body": True}).wait(2).settle(2, size)
    result = replay(s.done(), "typical", colo_warm=False)
    assert result.ms == pytest.approx(R2_MS + size / (figure("throughput_mb_s", "typical") * 1e3))
    assert result.round_trips == 1
    assert result.bytes == size  # counted once


def test_colo_state_changes_kv_reads_only() -> None:
    s = Schedule().issue(1, KV).wait(2).settle(1).issue(2, R2).wait(2).settle(2).done()
    cold, warm = replay(s, "typical", False), replay(s, "typical", True)
    assert cold.ms - warm.ms == pytest.approx(
        figure("kv_cold", "typical") - figure("kv_hot", "typical")
    )
    assert replay(s, "pessimistic", False).ms > cold.ms


def test_a_new_questions_cache_probe_is_cold_on_a_warm_colo_too() -> None:
    probe = {**KV, "key": "qcache:abc"}
    # a fresh isolate's probe, awaited alone before the package loads (its manifest read)
    manifest = {**R2, "key": "packages/kv-1/manifest.json"}
    missed = Schedule().issue(1, probe).wait(2).settle(1, 0).issue(2, manifest).done()
    found = Schedule().issue(1, probe).wait(2).settle(1, 900).done()
    assert replay(missed, "typical", True).ms == pytest.approx(figure("kv_cold", "typical"))
    assert replay(found, "typical", True).ms == pytest.approx(
        figure("kv_hot", "typical") + 900 / (figure("throughput_mb_s", "typical") * 1e3)
    )


CACHE = {"binding": "caches.default", "cls": "Cache", "op": "match"}
OBJECT = "packages/_objects/shared.s-0123456789abcdef.bin"
URL = "https://objects.knowledge-router.internal/" + OBJECT


def _colo_read(hit: bool, size: int = 1000) -> dict[str, Any]:
    """One content-named read as the host records it: a colo hit, or a miss then R2."""
    s = Schedule().work(1).issue(1, {**CACHE, "key": URL}).wait(1)
    if hit:
        s.settle(1, size)
    else:
        s.settle(1, 0).issue(2, {**R2, "key": OBJECT}).wait(3).settle(2, size, headers_only=True)
        s.issue(3, {**R2, "op": "body.arrayBuffer", "key": OBJECT, "body": True})
        s.wait(1).settle(3, size)
    return s.work(1).done()


def test_a_warm_colo_serves_every_content_named_read_and_a_cold_one_none() -> None:
    transfer = 1000 / (figure("throughput_mb_s", "typical") * 1e3)
    match = figure("cache_match", "typical")
    for hit in (True, False):  # the same read, recorded as a hit or as a miss
        warm = replay(_colo_read(hit), "typical", colo_warm=True)
        cold = replay(_colo_read(hit), "typical", colo_warm=False)
        assert warm.ms == pytest.approx(2 + match + transfer)
        assert cold.ms == pytest.approx(2 + match + R2_MS + transfer)
        assert warm.round_trips == cold.round_trips == 1  # a lookup that missed is no round
        assert warm.bytes == cold.bytes == 1000


def test_a_cache_probe_beside_the_reads_holds_nothing_back_when_it_misses() -> None:
    probe = {**KV, "key": "qcache:abc"}
    beside = Schedule().issue(1, probe).work(1).issue(2, R2).wait(1).settle(1, 0)
    beside.wait(1).settle(2).work(1)
    # a fresh isolate's probe is awaited alone, before the package loads (the manifest)
    manifest = {**R2, "key": "packages/kv-1/manifest.json"}
    alone = Schedule().issue(1, probe).wait(1).settle(1, 0).work(1).issue(2, manifest)
    alone.wait(1).settle(2).work(1)
    assert replay(beside.done(), "typical", True).ms == pytest.approx(1 + R2_MS + 1)
    assert replay(alone.done(), "typical", True).ms == pytest.approx(
        figure("kv_cold", "typical") + 1 + R2_MS + 1
    )


def test_a_write_never_holds_the_response_back() -> None:
    put = {**KV, "op": "put", "key": "qcache:abc"}
    s = Schedule().work(1).issue(1, put).wait(1).settle(1).work(1).done()
    assert replay(s, "pessimistic", False).ms == pytest.approx(2)


def test_cpu_of_the_hosts_proxies_and_of_waiting_is_not_the_isolates() -> None:
    s = Schedule().work(4, host_ms=3).issue(1, D1).wait(10, cpu_ms=6).settle(1).work(2)
    result = replay(s.done(), "typical", colo_warm=False)
    assert result.cpu_ms == pytest.approx(1 + 2)
    assert result.ms == pytest.approx(1 + D1_MS + 2)


def test_settlements_are_consumed_in_the_recorded_order() -> None:
    # the D1 call settled first in the recording; the model waits for it, then for R2
    s = Schedule().issue(1, R2).issue(2, D1).wait(4).settle(2).work(1).settle(1).work(1)
    result = replay(s.done(), "typical", colo_warm=False)
    assert result.ms == pytest.approx(max(D1_MS + 1, R2_MS) + 1)


def test_chained_requests_add_up_and_the_json_object_has_the_fields_the_checks_read() -> None:
    app = Schedule().work(50).done()
    first = Schedule().work(1).issue(1, R2).wait(5).settle(1).work(1).done()
    assert replay(chain(app, first), "typical", False).ms == pytest.approx(52 + R2_MS)
    warm = [Schedule().work(ms).issue(1, KV).wait(1).settle(1).done() for ms in (1, 2, 3)]
    recorded = {
        "sections": 300,
        "fresh": [{"app": app, "first": first}],
        "warm": warm,
        "heap_bytes": 64 * 1024 * 1024,
    }
    result = model(recorded, "pessimistic")
    assert result["sections"] == 300 and result["scenario"] == "pessimistic"
    assert set(result["states"]) == set(STATES)
    for state in STATES:
        assert {"p50_ms", "p95_ms", "round_trips_max", "kib_p95"} <= set(result["states"][state])
    assert result["states"]["warm"]["p50_ms"] == pytest.approx(2 + figure("kv_hot", "pessimistic"))
    assert result["cpu_ms"]["p50"] == pytest.approx(2)
    assert result["heap_mib"] == 64
