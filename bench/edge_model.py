"""An edge cost model from real runs (issue 32, item 1): the Worker's binding calls, recorded in
Pyodide, replayed under published Cloudflare latencies.

    python bench/edge_model.py --sections 10000 [--scenario typical|pessimistic] [--reuse-build]
        [--json] [--queries N] [--fresh N] [--root /work/synthetic] [--replay-only] [--all]
        [--var KEY=VALUE ...] [--tag TAG]

The recording: the real ``src/entry.py`` in Pyodide (tests/pyodide/host.mjs with
``recordCalls``) over wrangler's local KV/R2/D1, the package of ``bench/scale.py`` (the corpus of
``synthetic_corpus.py`` under ``ROOT/scale-N/``, built into ``ROOT/scale-N-work/package``;
``--reuse-build`` takes the package already there). Each request carries its schedule: every
binding call (binding, class, operation, key, bytes, when it was issued and when it settled,
ms since the request began), the main thread's CPU time at each of those moments and what of
it wrangler's local proxies spent (the host's work, not the isolate's). ``--fresh N``
hosts each answer one query as their first request (after the app import, ``GET
/v1/metrics``), then one more host answers the other queries in order: its first is one more
fresh sample, the rest are the warm isolate. The schedules are kept in
``ROOT/scale-N-work/edge_schedules.json`` (``--replay-only`` replays them again).

The replay (``replay``): the isolate is one thread. Between two recorded events it spent the
CPU time measured between them; a call issued at modelled time ``T`` settles at ``T`` plus its
modelled latency (a round trip by binding, operation and colo state, plus its bytes over the
scenario's throughput), and not before a connection is free when the binding counts against the
six simultaneous connections of a Worker invocation; when the recording shows the isolate
resuming on a call's settlement, the model waits for that settlement (writes excepted: the Worker
makes them in ``waitUntil``, after the response). Calls settled in the
recording are consumed in the recorded order (so a reordering that real latencies would allow is
not credited: the model is pessimistic there). The sequential round trips are the longest chain
of calls each issued after the previous one settled.

States: ``fresh`` = a new isolate on a cold colo (app import + the first query, which loads the
package); ``cold_colo`` = a warm isolate whose every binding read misses the colo's caches;
``warm`` = a warm isolate on a warm colo (KV reads are hot, except the query-cache probe of a
question never asked, which no colo holds). R2's content-named files are read through the colo's
cache (``router.adapters.cloudflare.cache``, docs/adr/0027), and so are a built version's
bundles; the manifest, D1, Vectorize and Workers AI have no colo cache on the code's path.

The colo's cache from one recording (``colo_view``): the host's cache (host.mjs ``ColoCache``)
starts empty and fills as the Worker reads, so an object's first read in a run is a ``match``
that misses, then the R2 get and body, and every later read a hit. On the warm colo every such
read hits: the miss takes the bytes R2 sent and the R2 calls are dropped. On the cold colo (and
for a fresh isolate) every read misses: a hit costs ``cache_match`` + ``r2_get`` + its bytes.
A colo lookup that misses is not a round trip of its own (it is the first ~2 ms of the read).

The query-cache probe (``router.sync.beside``): it starts with the first index reads and only a
hit is waited for, so a probe that missed (``_probes_beside``) holds back neither a read nor the
response; the probe a fresh isolate awaits alone before loading the package is replayed like
any read. The latency figures and their
sources: ``FIGURES`` (the table in bench/README.md, "An edge cost model";
``--scenarios-table`` prints it).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
MIB = 1024 * 1024
CONNECTION_LIMIT = 6
STATES = ("fresh", "cold_colo", "warm")

# -- the scenarios -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    """One latency figure: typical and pessimistic values (ms, or MB/s for throughput), what
    it is based on and when that was published or read."""

    typical: float
    pessimistic: float
    basis: str
    date: str


# Keys are the replay's call categories. "published" means the figure or its bound comes from
# the named source (not measured here); "assumed" means no published figure was found and the
# value is ours, within what the named source describes.
FIGURES: dict[str, Figure] = {
    "kv_hot": Figure(
        3.0,
        10.0,
        "published bound: hot keys served from the colo's cache, the hottest in memory in "
        "< 1 ms; hot reads up to 3× faster (Cloudflare blog, 'We made Workers KV up to 3x "
        "faster — here's the data'); values assumed within it",
        "2024-09-26",
    ),
    "kv_cold": Figure(
        30.0,
        150.0,
        "published description: a cold read goes to the regional tier, then the central tier, "
        "then the central store (Cloudflare docs, 'How KV works'; the 2024-09-26 post: ~30 % "
        "of misses end in a regional cache); values assumed (regional / cross-continent store)",
        "2024-09-26",
    ),
    "kv_write": Figure(
        30.0,
        150.0,
        "assumed (writes go to the central store; the Worker writes in waitUntil)",
        "2026-12-05",
    ),
    "cache_match": Figure(
        2.0,
        8.0,
        "assumed: a Cache API lookup answered by the colo the Worker runs in (the cache is "
        "per data center, never replicated: Cloudflare docs, Workers 'Cache'); a miss costs "
        "the same lookup, then the R2 read",
        "2026-12-05",
    ),
    "cache_put": Figure(
        2.0,
        8.0,
        "assumed (the Worker stores in the colo after the response, in waitUntil)",
        "2026-12-05",
    ),
    "r2_get": Figure(
        30.0,
        120.0,
        "assumed time to first byte: no published R2 percentile found; a binding read is "
        "served from the bucket's location, with no colo cache in between (our reading of the "
        "R2 docs, not re-read here); pessimistic = bucket on another continent",
        "2026-12-05",
    ),
    "r2_range": Figure(
        30.0,
        120.0,
        "as r2_get (a ranged get costs the same first byte, fewer bytes)",
        "2026-12-05",
    ),
    "r2_head": Figure(25.0, 100.0, "as r2_get, no body", "2026-12-05"),
    "r2_write": Figure(40.0, 150.0, "assumed (not on the query path)", "2026-12-05"),
    "d1_query": Figure(
        8.0,
        150.0,
        "published description: without read replicas every query goes to the primary's "
        "region (Cloudflare blog, 'Sequential consistency without borders: how D1 implements "
        "global read replication'); typical = primary in-region, a primary-key read; "
        "pessimistic = one cross-continent round trip (assumed 150 ms)",
        "2025-04-10",
    ),
    "vectorize_query": Figure(
        31.0,
        120.0,
        "published: median query latency 549 → 31 ms with Vectorize v2 (Cloudflare blog, "
        "Vectorize generally available, Birthday Week; recalled, not re-read here); "
        "pessimistic assumed",
        "2024-09-26",
    ),
    "ai_embedding": Figure(
        40.0,
        200.0,
        "assumed (Workers AI text embedding, one short query, no published p50)",
        "2026-12-05",
    ),
    "throughput_mb_s": Figure(
        100.0,
        25.0,
        "assumed body throughput from a binding into the isolate (MB/s)",
        "2026-12-05",
    ),
}
# Which bindings count against the six connections of an invocation (Cloudflare docs, Workers
# platform limits, "Simultaneous open connections": fetch, KV, Cache API, R2 … up to six waiting
# for response headers, a seventh is queued; D1, Vectorize and Workers AI are not listed there).
LIMITED = frozenset({"kv", "r2", "cache"})
SCENARIOS = ("typical", "pessimistic")


def figure(name: str, scenario: str) -> float:
    value = FIGURES[name]
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}: {', '.join(SCENARIOS)}")
    return value.typical if scenario == "typical" else value.pessimistic


# -- calls -------------------------------------------------------------------------------------

KIND_OF_CLASS = {
    "KvNamespace": "kv",
    "R2Bucket": "r2",
    "D1Database": "d1",
    "VectorizeIndexImpl": "vectorize",
    "Ai": "ai",
    "Cache": "cache",
}
_VERSION = re.compile(r"[0-9a-f]{8,}|\d+")


def kind_of(call: dict[str, Any]) -> str:
    return KIND_OF_CLASS.get(str(call.get("cls")), str(call.get("cls")))


def key_class(call: dict[str, Any]) -> str:
    """The call's key with versions, hashes and numbers folded (``packages/#/shards/#.bin``)."""
    key = str(call.get("key") or "")
    if kind_of(call) == "d1":
        return " ".join(key.split()[:4])
    return _VERSION.sub("#", key)[:80]


_LAZY = re.compile(r"^(?:[^.]+\.)?(?P<stem>[^.]+?)-[0-9a-f]{16}\.bin$")


def what(call: dict[str, Any]) -> str:
    """What a call reads, for the floor: an R2 file's stem (``s`` shards, ``x`` exact keys,
    ``texts`` …, ``docs/adr/0010``), a KV key's prefix, a D1 statement's table."""
    key = str(call.get("key") or "")
    kind = kind_of(call)
    if kind == "r2":
        name = key.rsplit("/", 1)[-1]
        found = _LAZY.match(name)
        return f"r2 {found['stem'] if found else _VERSION.sub('#', name)}"
    if kind == "kv":
        return f"kv {key.split(':', 1)[0]}"
    if kind == "d1":
        table = re.search(r"(?:FROM|INTO|UPDATE)\s+(\w+)", key, re.IGNORECASE)
        return f"d1 {table.group(1) if table else 'query'}"
    return kind


def category(call: dict[str, Any], colo_warm: bool) -> str | None:
    """The ``FIGURES`` row of a call's round trip; None for a body read (bytes only)."""
    if call.get("body"):
        return None
    kind, op = kind_of(call), str(call.get("op"))
    if kind == "kv":
        if op in ("put", "delete"):
            return "kv_write"
        # a query-cache probe that finds nothing is a question never asked: its key was never
        # read at this colo either, so the probe goes to the central store on a warm colo too
        new_question = str(call.get("key") or "").startswith("qcache:") and not call.get("bytes")
        return "kv_hot" if colo_warm and not new_question else "kv_cold"
    if kind == "r2":
        if op in ("put", "delete", "createMultipartUpload"):
            return "r2_write"
        if op == "head":
            return "r2_head"
        return "r2_range" if call.get("range") else "r2_get"
    if kind == "d1":
        return "d1_query"
    if kind == "vectorize":
        return "vectorize_query"
    if kind == "ai":
        return "ai_embedding"
    if kind == "cache":
        return "cache_put" if op in ("put", "delete") else "cache_match"
    return "r2_get"


def in_background(call: dict[str, Any]) -> bool:
    """A write: the Worker makes them after the response (``entry.py``: the KV cache copy and
    the query-log batch run in ``waitUntil``), so none holds the response back, even when the
    local simulator settled it before the response was written."""
    if kind_of(call) == "d1":
        return str(call.get("op")) in ("batch", "run", "exec")
    return category(call, colo_warm=False) in ("kv_write", "r2_write", "cache_put")


def latency_ms(call: dict[str, Any], scenario: str, colo_warm: bool) -> float:
    """Modelled time from issue to settlement: the round trip plus the bytes' transfer (an R2
    ``get`` settles on its headers: its bytes are transferred by the body read that follows)."""
    sent = 0.0 if call.get("headers_only") else float(call.get("bytes") or 0)
    transfer = sent / (figure("throughput_mb_s", scenario) * 1e3)
    return transfer + round_trip_ms(call, scenario, colo_warm)


def round_trip_ms(call: dict[str, Any], scenario: str, colo_warm: bool) -> float:
    """The call's round trip without its bytes (what holds one of the six connections); a
    colo-cache hit replayed on a cold colo is the miss and then the R2 read (``colo_view``)."""
    name = category(call, colo_warm)
    ms = figure(name, scenario) if name else 0.0
    if call.get("then_r2"):
        ms += figure("r2_get", scenario)
    return ms


# -- the replay --------------------------------------------------------------------------------


@dataclass
class Replay:
    """One request replayed: modelled ms, sequential round trips, bytes received, measured CPU
    ms, and where the modelled time went (CPU, and waiting on each kind of read: ``what``)."""

    ms: float
    round_trips: int
    bytes: int
    cpu_ms: float
    waits: dict[str, float]


def _cached_key(call: dict[str, Any]) -> str:
    """The R2 key a colo-cache call is for (its URL's path: cache.py's ``CACHE_ORIGIN + key``)."""
    parts = str(call.get("key") or "").split("/", 3)
    return parts[3] if len(parts) == 4 else ""


def colo_view(
    events: list[dict[str, Any]], calls: dict[Any, dict[str, Any]], colo_warm: bool
) -> list[dict[str, Any]]:
    """The recording as the colo's state would have it. The host's colo cache starts empty
    and fills as the Worker reads (host.mjs ``ColoCache``): an object's first read in the run
    is a ``match`` that misses, then an R2 ``get`` and its body; every later one a hit. On a
    **warm colo** every such read hits: the miss becomes a hit with the bytes R2 sent and the
    R2 get and body are dropped. On a **cold colo** (and for a fresh isolate) every read
    misses: a hit becomes a miss followed by an R2 get of the same bytes (one call costing
    ``cache_match + r2_get``, two sequential round trips). ``calls`` is updated in place."""
    dropped: set[Any] = set()
    for number, event in enumerate(events):
        call = calls.get(event["id"]) if event["kind"] == "issue" else None
        if call is None or kind_of(call) != "cache" or call.get("op") != "match":
            continue
        if not colo_warm:
            call["then_r2"] = bool(call.get("bytes"))
            continue
        if call.get("bytes"):
            continue
        key = _cached_key(call)
        follow = [
            later["id"]
            for later in events[number + 1 :]
            if later["kind"] == "issue"
            and kind_of(calls[later["id"]]) == "r2"
            and calls[later["id"]].get("key") == key
        ][:2]  # its get, then its body read
        if not follow:
            continue  # not in R2 either: a miss everywhere
        body = calls[follow[-1]]
        call["bytes"] = int(body.get("bytes") or 0)
        call["colo_hit"] = True
        dropped.update(follow)
    return [e for e in events if e["id"] not in dropped]


def replay(schedule: dict[str, Any], scenario: str, colo_warm: bool) -> Replay:
    """Replay a recorded schedule (host.mjs ``schedule``: ``events``, ``end_ms``,
    ``end_cpu_us``) under ``scenario``; see the module docstring for the rules."""
    events = [e for e in schedule.get("events", []) if not e.get("after_response")]
    calls = {e["id"]: dict(e) for e in events if e["kind"] == "issue"}
    for event in events:
        if event["kind"] == "settle" and event["id"] in calls:
            calls[event["id"]]["bytes"] = event.get("bytes", 0)
            calls[event["id"]]["headers_only"] = bool(event.get("headers_only"))
    events = colo_view(events, calls, colo_warm)
    beside = _probes_beside(events, calls)
    clock = 0.0
    last_t, last_cpu, last_host = 0.0, 0.0, 0.0
    cpu_total = 0.0
    ends: dict[int, float] = {}
    depth: dict[int, int] = {}
    open_limited: list[float] = []  # modelled settle times of limited calls in flight
    depth_seen = 0  # the deepest chain settled (as consumed) so far
    waits: dict[str, float] = {}
    settled_ids: set[int] = set()

    def spend(event: dict[str, Any], resumed: bool) -> None:
        """Advance by the isolate's CPU since the previous event: the thread's CPU less what
        the host's proxies spent, when the gap ends with the isolate acting (an issue, the
        response); a gap that ends with a settlement was the isolate waiting on it."""
        nonlocal clock, last_t, last_cpu, last_host, cpu_total
        t, cpu_us = float(event.get("t", 0.0)), float(event.get("cpu", 0.0))
        host_us = float(event.get("host", last_host))
        if resumed:
            own = (cpu_us - last_cpu) - (host_us - last_host)
            cpu = max(0.0, min(own / 1e3, t - last_t))
            clock += cpu
            cpu_total += cpu
            waits["cpu"] = waits.get("cpu", 0.0) + cpu
        last_t, last_cpu, last_host = max(last_t, t), max(last_cpu, cpu_us), host_us

    for event in events:
        spend(event, resumed=event["kind"] != "settle")
        call = calls.get(event["id"])
        if call is None:
            continue
        if event["kind"] == "issue":
            start = clock
            if kind_of(call) in LIMITED and not call.get("body"):
                # connections still waiting for headers; a call queued behind them starts
                # when all but five of them (and of the calls queued before it) have their own
                open_limited[:] = sorted(end for end in open_limited if end > start)
                if len(open_limited) >= CONNECTION_LIMIT:
                    start = open_limited[len(open_limited) - CONNECTION_LIMIT]
            ends[event["id"]] = start + latency_ms(call, scenario, colo_warm)
            if kind_of(call) in LIMITED and not call.get("body"):
                # the connection is held until the response headers: the round trip
                open_limited.append(start + round_trip_ms(call, scenario, colo_warm))
            depth[event["id"]] = depth_seen + _steps(call)
        elif event["kind"] == "settle" and event["id"] in beside:
            settled_ids.add(event["id"])  # its bytes count; its time holds nothing back
        elif event["kind"] == "settle" and event["id"] in ends and not in_background(call):
            settled_ids.add(event["id"])
            end = ends[event["id"]]
            if end > clock:
                name = what(call) + (" body" if call.get("body") else "")
                waits[name] = waits.get(name, 0.0) + end - clock
                clock = end
            depth_seen = max(depth_seen, depth[event["id"]])
    finish = {
        "t": schedule.get("end_ms", last_t),
        "cpu": schedule.get("end_cpu_us", last_cpu),
        "host": schedule.get("end_host_us", last_host),
    }
    spend(finish, resumed=True)
    received = sum(int(calls[i].get("bytes") or 0) for i in settled_ids if not calls[i].get("body"))
    return Replay(clock, depth_seen, received, cpu_total, waits)


def _steps(call: dict[str, Any]) -> int:
    """Sequential reads a call adds to its chain: none for a body read (its get was one) or a
    colo lookup that missed (it is the first milliseconds of the R2 read that follows it, and
    a cold-colo hit replayed as a miss is one read: its R2 part), one for any other call."""
    if call.get("body"):
        return 0
    if kind_of(call) == "cache" and call.get("op") == "match":
        return 1 if call.get("bytes") else 0  # a hit, or a hit replayed as miss + R2 read
    return 1


def _probes_beside(events: list[dict[str, Any]], calls: dict[Any, dict[str, Any]]) -> set[Any]:
    """Query-cache probes that missed beside the cascade (pipeline.py and
    ``router.sync.beside``: the probe starts with the first index reads and only a hit is
    waited for; a miss, or a probe slower than the whole cascade, holds back neither a read
    nor the response). Every missed probe of a request is one, except the probe a fresh
    isolate awaits alone before loading the package (``cached_before_loading``): it is
    followed by the manifest's read. Decided from the code, not from the recorded order: the
    local KV often settled before the cascade issued its first read."""
    loads = any(
        e["kind"] == "issue" and str(calls[e["id"]].get("key") or "").endswith("manifest.json")
        for e in events
        if e["id"] in calls
    )
    if loads:
        return set()
    return {
        e["id"]
        for e in events
        if e["kind"] == "issue"
        and kind_of(calls[e["id"]]) == "kv"
        and str(calls[e["id"]].get("key") or "").startswith("qcache:")
        and calls[e["id"]].get("op") == "get"
        and not calls[e["id"]].get("bytes")
    }


def chain(*schedules: dict[str, Any]) -> dict[str, Any]:
    """Several requests' schedules one after another, as one (the app import, then a query)."""
    events: list[dict[str, Any]] = []
    offset_t = offset_cpu = offset_host = 0.0
    for number, schedule in enumerate(schedules):
        for event in schedule.get("events", []):
            if event.get("after_response"):
                continue
            moved = dict(
                event,
                t=event["t"] + offset_t,
                cpu=event["cpu"] + offset_cpu,
                host=event.get("host", 0.0) + offset_host,
            )
            moved["id"] = f"{number}:{event['id']}"
            events.append(moved)
        offset_t += float(schedule.get("end_ms", 0.0))
        offset_cpu += float(schedule.get("end_cpu_us", 0.0))
        offset_host += float(schedule.get("end_host_us", 0.0))
    return {
        "events": events,
        "end_ms": offset_t,
        "end_cpu_us": offset_cpu,
        "end_host_us": offset_host,
    }


# -- summaries ---------------------------------------------------------------------------------


def percentile(values: Iterable[float], q: float) -> float | None:
    """The ``q``-th percentile (0–100), interpolated; None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _r(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def summarize(replays: list[Replay]) -> dict[str, Any]:
    """p50/p95 ms, the most sequential round trips, KiB p95, and the median share of each
    thing the modelled time waited on (``floor``: the largest)."""
    shares: dict[str, list[float]] = {}
    for item in replays:
        for name, ms in item.waits.items():
            shares.setdefault(name, []).append(ms)
    floor = {
        name: _r(sum(values) / len(replays), 1)
        for name, values in sorted(shares.items(), key=lambda kv: -sum(kv[1]))
    }
    return {
        "p50_ms": _r(percentile([r.ms for r in replays], 50)),
        "p95_ms": _r(percentile([r.ms for r in replays], 95)),
        "round_trips_max": max((r.round_trips for r in replays), default=0),
        "round_trips_p50": _r(percentile([r.round_trips for r in replays], 50)),
        "kib_p95": _r(percentile([r.bytes / 1024 for r in replays], 95)),
        "requests": len(replays),
        "mean_ms_by_wait": floor,
    }


def model(recorded: dict[str, Any], scenario: str) -> dict[str, Any]:
    """The JSON object of ``--json`` from a recording (``record``'s result)."""
    fresh = [
        replay(chain(sample["app"], sample["first"]), scenario, colo_warm=False)
        for sample in recorded["fresh"]
    ]
    warm_schedules = recorded["warm"]
    states = {
        "fresh": summarize(fresh),
        "cold_colo": summarize([replay(s, scenario, False) for s in warm_schedules]),
        "warm": summarize([replay(s, scenario, True) for s in warm_schedules]),
    }
    cpu = [replay(s, scenario, True).cpu_ms for s in warm_schedules]
    process_cpu = [float(s.get("end_cpu_us", 0)) / 1e3 for s in warm_schedules]
    return {
        "sections": recorded["sections"],
        "scenario": scenario,
        "states": states,
        "cpu_ms": {"p50": _r(percentile(cpu, 50), 2), "p95": _r(percentile(cpu, 95), 2)},
        "heap_mib": _r(recorded["heap_bytes"] / MIB, 1),
        "heap_used_mib": _r(recorded.get("heap_used_bytes", 0) / MIB, 1),
        "process_cpu_ms": {
            "p50": _r(percentile(process_cpu, 50), 2),
            "p95": _r(percentile(process_cpu, 95), 2),
        },
        "fresh_cpu_ms_p50": _r(percentile([r.cpu_ms for r in fresh], 50), 1),
        "queries": {"warm": len(warm_schedules), "fresh": len(recorded["fresh"])},
        "recorded": recorded.get("conditions", {}),
    }


# -- the recording -----------------------------------------------------------------------------


def record(
    sections: int,
    root: Path,
    queries: int,
    fresh: int,
    reuse_build: bool,
    seed: int = 1,
    worker_vars: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Build (or reuse) the package of ``sections``, then record the Worker's schedules
    (``worker_vars``: Worker variables on top of the bench's, e.g. ``KR_RECORDS=objects``)."""
    import tempfile

    sys.path[:0] = [str(ROOT), str(BENCH)]
    from tests.pyodide.client import PyodideHost, store_api_key

    from scale import build, ensure_corpus, load_queries, request_body, reused_build
    from worker_pyodide import prepare_state, publisher_keys, write_record_rows

    corpus = root / f"scale-{sections}"
    work = root / f"scale-{sections}-work"
    ensure_corpus(corpus, sections, seed, 20)
    if reuse_build:
        _, package, _ = reused_build(work, BENCH / "scale.json", sections)
    else:
        _, package, _ = build(corpus, work)
    rows = load_queries(corpus, 80, seed)
    bodies = [request_body(row) for row in rows][: fresh + queries + 1]
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    version = manifest["knowledge_version"]
    with tempfile.TemporaryDirectory(prefix=f"kr-edge-{sections}-") as tmp:
        tmpdir = Path(tmp)
        state = prepare_state(tmpdir, "edge")

        def host(role: str) -> PyodideHost:
            return PyodideHost(
                persist_to=state,
                log=tmpdir / f"host-{role}.log",
                vectorize={"dimensions": 256},
                vars={"KR_QUERY_LOG": "off", "KR_ALLOW_ANONYMOUS": "on", **(worker_vars or {})},
                record_calls=role != "publish",
            )

        with host("publish") as publisher:
            records = tmpdir / "records.jsonl"
            write_record_rows(package, records)
            publisher.bulk_store(package, version, records, keys=publisher_keys(package))
        tenants = sorted({str(b["tenant"]) for b in bodies if b.get("tenant")})
        keys = {tenant: store_api_key(state, tenant) for tenant in tenants}

        def headers(body: dict[str, Any]) -> dict[str, str] | None:
            tenant = body.get("tenant")
            return {"Authorization": f"Bearer {keys[tenant]}"} if tenant else None

        def ask(worker: PyodideHost, body: dict[str, Any]) -> dict[str, Any]:
            response = worker.fetch("POST", "/v1/query", body, headers=headers(body))
            assert response.schedule is not None
            return dict(response.schedule, status=response.status, wall_ms=response.ms)

        samples: list[dict[str, Any]] = []
        for number in range(fresh):
            with host(f"fresh-{number}") as worker:
                app = worker.fetch("GET", "/v1/metrics").schedule
                samples.append({"app": app, "first": ask(worker, bodies[number])})
            print(f"  fresh isolate {number + 1}/{fresh}", file=sys.stderr, flush=True)
        warm: list[dict[str, Any]] = []
        with host("warm") as worker:
            app = worker.fetch("GET", "/v1/metrics").schedule
            samples.append({"app": app, "first": ask(worker, bodies[fresh])})
            for number, body in enumerate(bodies[fresh + 1 :], start=1):
                warm.append(ask(worker, body))
                if number % 50 == 0:
                    print(f"  warm {number}/{len(bodies) - fresh - 1}", file=sys.stderr)
            stats = worker.stats()
    statuses: dict[str, int] = {}
    for item in warm:
        statuses[str(item["status"])] = statuses.get(str(item["status"]), 0) + 1
    return {
        "sections": manifest.get("counts", {}).get("sections", sections),
        "version": version,
        "fresh": samples,
        "warm": warm,
        "heap_bytes": int(stats["heap_bytes"]),
        "heap_used_bytes": int(stats.get("heap_used_bytes", 0)),
        "conditions": {
            "date": time.strftime("%Y-%m-%d"),
            "statuses": statuses,
            "pyodide": stats.get("pyodide_version"),
            "vars": worker_vars or {},
            "colo": stats.get("colo"),
        },
    }


def scenario_table() -> str:
    """The README's table of figures (markdown), from ``FIGURES``."""
    lines = [
        "| call | typical ms | pessimistic ms | basis (not measured here) | date |",
        "|---|---:|---:|---|---|",
    ]
    for name, item in FIGURES.items():
        lines.append(
            f"| `{name}` | {item.typical:g} | {item.pessimistic:g} | {item.basis} | {item.date} |"
        )
    return "\n".join(lines)


def results_row(result: dict[str, Any]) -> str:
    states = result["states"]
    cells = [f"{result['sections']:,}", result["scenario"]]
    for state in STATES:
        s = states[state]
        cells.append(f"{s['p50_ms']} / {s['p95_ms']} ({s['round_trips_max']}, {s['kib_p95']})")
    cells += [f"{result['cpu_ms']['p50']} / {result['cpu_ms']['p95']}", f"{result['heap_mib']}"]
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sections", type=int, required=True)
    parser.add_argument("--scenario", choices=SCENARIOS, default="typical")
    parser.add_argument("--reuse-build", action="store_true")
    parser.add_argument("--replay-only", action="store_true", help="replay the kept schedules")
    parser.add_argument("--json", action="store_true", help="print the JSON object only")
    parser.add_argument("--all", action="store_true", help="every scenario, as table rows")
    parser.add_argument("--root", type=Path, default=Path("/work/synthetic"))
    parser.add_argument("--queries", type=int, default=150, help="warm queries recorded")
    parser.add_argument("--fresh", type=int, default=4, help="fresh isolates (+1: the warm one)")
    parser.add_argument("--scenarios-table", action="store_true")
    parser.add_argument(
        "--var", action="append", default=[], help="a Worker variable KEY=VALUE (repeatable)"
    )
    parser.add_argument(
        "--tag", default="", help="keep the schedules as edge_schedules-TAG.json (a variant)"
    )
    args = parser.parse_args(argv)
    if args.scenarios_table:
        print(scenario_table())
        return 0
    name = f"edge_schedules-{args.tag}.json" if args.tag else "edge_schedules.json"
    kept = args.root / f"scale-{args.sections}-work" / name
    if args.replay_only:
        recorded = json.loads(kept.read_text(encoding="utf-8"))
    else:
        worker_vars = dict(item.split("=", 1) for item in args.var)
        recorded = record(
            args.sections,
            args.root,
            args.queries,
            args.fresh,
            args.reuse_build,
            worker_vars=worker_vars,
        )
        kept.write_text(json.dumps(recorded), encoding="utf-8")
    scenarios = SCENARIOS if args.all else (args.scenario,)
    results = [model(recorded, scenario) for scenario in scenarios]
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else results))
        return 0
    for result in results:
        print(json.dumps(result, indent=1))
        print(results_row(result))
    if len(results) == 1:
        print(json.dumps(results[0]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
