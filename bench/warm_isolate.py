"""A warm isolate's reads (issue 32, item 4): how many questions a warm Worker answers without a
single subrequest, and the wasm heap that costs.

    python bench/warm_isolate.py --sections 10000 [--root /work/synthetic] [--queries N] [--json]

The real ``src/entry.py`` in Pyodide (tests/pyodide/host.mjs with ``recordCalls``: every binding
call a request makes is recorded) over wrangler's local KV/R2/D1, the package of
``bench/scale.py`` (``ROOT/scale-N-work/package``, stored from JS where the product's publisher
puts each file, the records into D1), query log off, anonymous access on, tenants by key.

"After warm-up" means: the query cache is turned off in the isolate (its in-memory LRU and its
KV copy: otherwise a repeated question is answered from the cache and the index is never
read), the bench's question set (``scale.load_queries``: the corpus's query file and 80 topical
questions) is asked once — the warm-up —, then the same set is asked again in the same order.
A question of the second pass makes zero subrequests when its request issued no binding call
at all; "index reads" counts only the package's own (R2 and D1's ``knowledge_records``): the
others are the isolate's freshness checks (the active version every
``KR_ACTIVE_VERSION_TTL_S``, an API key every ``KR_KEY_CACHE_TTL_S``), which depend on the
wall time the local simulators take, not on the caches.

The latency budget is lifted (``KR_MAX_LATENCY_MS``, ``--max-latency-ms``): on the local
simulators a read costs ≈ 8 ms (R2) to 18 ms (D1), so with the Worker's default budget the
warm-up's slow questions skip late stages (graph, expansion) that the fast repeat then runs,
reading what the warm-up never asked for — the two passes would not do the same work.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
MIB = 1024 * 1024
LIFTED_MS = 600_000.0

CACHE_OFF = """
from router.adapters.cloudflare.service import service_from_env
service_from_env(env).cache = None
result = True
"""

CACHES = """
from router.adapters.cloudflare.service import service_from_env
package = service_from_env(env)._package
room = getattr(package, "_room", None)
c = getattr(package, "caches", None)
result = {
    "budget": str(package.budget),
    "room": None if room is None else {
        "start_mib": room.start / 2**20, "highest_mib": room.highest / 2**20,
        "ceiling_mib": room.ceiling / 2**20, "room_mib": room.room(room.highest) / 2**20,
    },
    "cached_mib": None if c is None else {
        "shards": c.shards.cached_bytes / 2**20, "chunks": c.chunks.cached_bytes / 2**20,
        "tables": c.exact.held / 2**20, "records": c.records.decoded.held / 2**20,
        "views": len(package._views),
    },
}
"""


def calls_of(schedule: dict[str, Any]) -> list[dict[str, Any]]:
    """The binding calls a request issued (body reads of an R2 get are not calls of their own)."""
    return [e for e in schedule.get("events", []) if e["kind"] == "issue" and not e.get("body")]


def is_index_read(call: dict[str, Any]) -> bool:
    """A read of the package: an R2 object, or D1's document records."""
    if call.get("cls") == "R2Bucket" or call.get("cls") == "Cache":
        return True
    return call.get("cls") == "D1Database" and "knowledge_records" in str(call.get("key") or "")


def summarize(schedules: list[dict[str, Any]]) -> dict[str, Any]:
    """Share of requests with no call at all, with no index read, and the calls by kind."""
    zero = sum(1 for s in schedules if not calls_of(s))
    no_index = sum(1 for s in schedules if not any(is_index_read(c) for c in calls_of(s)))
    kinds: dict[str, int] = {}
    for schedule in schedules:
        for call in calls_of(schedule):
            key = str(call.get("key") or "")
            name = (
                f"{call.get('cls')} {key.split(':', 1)[0] if call.get('cls') != 'R2Bucket' else ''}"
            )
            if call.get("cls") == "R2Bucket":
                stem = key.rsplit("/", 1)[-1].split(".")
                name += stem[-2].split("-")[0] if len(stem) >= 2 else key
            if call.get("cls") == "D1Database":
                name = "D1 " + " ".join(key.split()[:4])
            kinds[name.strip()] = kinds.get(name.strip(), 0) + 1
    total = max(1, len(schedules))
    return {
        "requests": len(schedules),
        "zero_subrequests": zero,
        "zero_share": round(zero / total, 4),
        "no_index_reads": no_index,
        "no_index_share": round(no_index / total, 4),
        "calls_by_kind": dict(sorted(kinds.items(), key=lambda kv: -kv[1])),
    }


def run(
    sections: int,
    root: Path,
    queries: int | None,
    src: Path | None = None,
    max_latency_ms: float = LIFTED_MS,
    heap_limit_mib: float | None = None,
    seed: int = 1,
) -> dict[str, Any]:
    sys.path[:0] = [str(ROOT), str(BENCH)]
    from tests.pyodide.client import PyodideHost, store_api_key

    from scale import load_queries, request_body, reused_build
    from worker_pyodide import prepare_state, publisher_keys, write_record_rows

    work = root / f"scale-{sections}-work"
    _, package, _ = reused_build(work, BENCH / "scale.json", sections)
    rows = load_queries(root / f"scale-{sections}", 80, seed)
    bodies = [request_body(row) for row in rows][: queries or None]
    version = json.loads((package / "manifest.json").read_text(encoding="utf-8"))[
        "knowledge_version"
    ]
    with tempfile.TemporaryDirectory(prefix=f"kr-warm-{sections}-") as tmp:
        tmpdir = Path(tmp)
        state = prepare_state(tmpdir, "warm")

        def host(role: str) -> PyodideHost:
            return PyodideHost(
                persist_to=state,
                log=tmpdir / f"host-{role}.log",
                vectorize={"dimensions": 256},
                vars={
                    "KR_QUERY_LOG": "off",
                    "KR_ALLOW_ANONYMOUS": "on",
                    "KR_MAX_LATENCY_MS": str(max_latency_ms),
                    **({"KR_HEAP_LIMIT_MIB": str(heap_limit_mib)} if heap_limit_mib else {}),
                },
                record_calls=role != "publish",
                src=src,
            )

        with host("publish") as publisher:
            records = tmpdir / "records.jsonl"
            write_record_rows(package, records)
            publisher.bulk_store(package, version, records, keys=publisher_keys(package))
        tenants = sorted({str(b["tenant"]) for b in bodies if b.get("tenant")})
        keys = {tenant: store_api_key(state, tenant) for tenant in tenants}

        def ask(worker: PyodideHost, body: dict[str, Any]) -> dict[str, Any]:
            tenant = body.get("tenant")
            headers = {"Authorization": f"Bearer {keys[tenant]}"} if tenant else None
            response = worker.fetch("POST", "/v1/query", body, headers=headers)
            assert response.schedule is not None
            return dict(response.schedule, status=response.status)

        passes: list[list[dict[str, Any]]] = []
        heaps: list[dict[str, Any]] = []
        started = time.perf_counter()
        with host("warm") as worker:
            worker.fetch("GET", "/v1/metrics")  # the app import
            worker.python(CACHE_OFF)
            for number in range(2):
                passes.append([ask(worker, body) for body in bodies])
                stats = worker.stats()
                heaps.append(
                    {
                        "heap_mib": round(int(stats["heap_bytes"]) / MIB, 1),
                        "heap_used_mib": round(int(stats.get("heap_used_bytes", 0)) / MIB, 1),
                        "caches": worker.python(CACHES),
                    }
                )
                print(f"  pass {number + 1} done", file=sys.stderr, flush=True)
    statuses: dict[str, int] = {}
    for item in passes[-1]:
        statuses[str(item["status"])] = statuses.get(str(item["status"]), 0) + 1
    return {
        "sections": sections,
        "questions": len(bodies),
        "warm_up": summarize(passes[0][1:]),  # the first request loads the package
        "after_warm_up": summarize(passes[1]),
        "heap": {"after_warm_up": heaps[0], "after_repeat": heaps[1]},
        "statuses": statuses,
        "max_latency_ms": max_latency_ms,
        "heap_limit_mib": heap_limit_mib,
        "date": time.strftime("%Y-%m-%d"),
        "wall_s": round(time.perf_counter() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sections", type=int, required=True)
    parser.add_argument("--root", type=Path, default=Path("/work/synthetic"))
    parser.add_argument("--queries", type=int, default=None, help="the first N questions only")
    parser.add_argument("--json", action="store_true", help="print the JSON object only")
    parser.add_argument("--src", type=Path, default=None, help="the Worker's src (a baseline)")
    parser.add_argument("--max-latency-ms", type=float, default=LIFTED_MS)
    parser.add_argument("--heap-limit-mib", type=float, default=None, help="KR_HEAP_LIMIT_MIB")
    args = parser.parse_args(argv)
    result = run(
        args.sections,
        args.root,
        args.queries,
        args.src,
        args.max_latency_ms,
        args.heap_limit_mib,
    )
    print(json.dumps(result, indent=None if args.json else 1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
