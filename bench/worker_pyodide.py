"""The Worker inside Pyodide (Node): cold first query, warm latency, wasm heap, package size.

Each package runs in a fresh host (the real ``src/entry.py`` over wrangler's local KV/R2/D1 and
the Vectorize/AI fakes of tests/pyodide), so its heap figure is its own. Cloudflare allows
128 MB per isolate and 1 s of start-up; the last lines extrapolate which corpus size reaches them.

    python bench/worker_pyodide.py                  # sample knowledge + SciFact (hash vectors)
    python bench/worker_pyodide.py --only sample
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.pyodide.client import (  # noqa: E402
    PyodideHost,
    WorkerResponse,
    run_wrangler,
    store_api_key,
)

from router.analysis.analyzer import AnalyzerConfig  # noqa: E402
from router.compile.beir import load_beir  # noqa: E402
from router.compile.build import build_knowledge, write_package  # noqa: E402
from router.compile.embedding import embed_sections  # noqa: E402
from router.compile.indexer import BuildConfig, compile_documents  # noqa: E402
from router.vectors.hash_embedder import HashEmbedder  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
ISOLATE_MEMORY_BYTES = 128 * 1024 * 1024
STARTUP_LIMIT_MS = 1000.0
MIB = 1024 * 1024


def sample_package(out: Path) -> tuple[Path, list[str]]:
    built = build_knowledge(ROOT / "knowledge", BuildConfig(), encoder=HashEmbedder())
    folder = write_package(built.package, out)
    golden = [json.loads(line)["query"] for line in (ROOT / "eval" / "golden.jsonl").open()]
    return folder, golden


def scifact_package(out: Path) -> tuple[Path, list[str]]:
    collection = load_beir(DATA / "scifact", split="test")
    config = BuildConfig(analyzer=AnalyzerConfig(language="english"))
    embeddings = embed_sections(collection.documents, HashEmbedder(), cache_root=out / "vcache")
    compiled = compile_documents(collection.documents, config, embeddings=embeddings)
    return write_package(compiled, out / "pkg"), list(collection.queries.values())


@dataclass
class WorkerRun:
    """One package served by a fresh host: the heap at each step, the first request (the app
    import), the first query (the package load) and the responses to the other requests."""

    boot_s: float
    startup_timings_ms: dict[str, Any]
    app_import: WorkerResponse
    first: WorkerResponse
    warm: list[WorkerResponse]
    heap_booted_bytes: int
    heap_app_bytes: int
    heap_loaded_bytes: int
    heap_after_bytes: int
    heap_used_after_bytes: int = 0  # the allocator's high-water mark (the heap grows in steps)


def prepare_state(work: Path, name: str) -> Path:
    """A fresh wrangler ``--persist-to`` folder with the D1 migrations applied."""
    state = work / f"state-{name}"
    run_wrangler(
        ["d1", "migrations", "apply", "KNOWLEDGE_DB", "--local", "--persist-to", str(state)]
    )
    return state


def run_worker(
    name: str,
    folder: Path,
    bodies: list[dict[str, Any]],
    work: Path,
    query_log: bool = True,
    on_progress: Callable[[int], None] | None = None,
    bulk: bool = False,
) -> WorkerRun:
    """Publish ``folder`` and POST ``bodies`` to ``/v1/query`` in order (the first is the cold
    query). A package without vectors is published through a host of its own and queried in a
    fresh one: a wasm heap never shrinks, so publishing in the measured isolate would count the
    whole package's bytes, and the Worker never publishes in production (``kr publish`` does).
    A package with vectors is published in the measured host (the Vectorize fake lives in it),
    so its heap includes the publish. ``bulk`` stores a package without vectors from JS instead
    (``bulk_store``: many puts at a time, the records into D1, no checks), for benchmark sizes
    the product's publisher would take hours to upload through the local simulator. Raises
    HostError when a host dies or a command fails."""
    state = prepare_state(work, f"{name}-{query_log}")
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    apart = not manifest.get("embedding")

    def host_for(role: str) -> PyodideHost:
        return PyodideHost(
            persist_to=state,
            log=work / f"host-{name}-{role}.log",
            vectorize={"dimensions": 256},
            # anonymous access on for the shared questions; a tenant's carry its key (ADR 0012)
            vars={"KR_QUERY_LOG": "on" if query_log else "off", "KR_ALLOW_ANONYMOUS": "on"},
        )

    if apart:
        with host_for("publish") as publisher:
            if bulk:
                rows = work / f"records-{name}.jsonl"
                write_record_rows(folder, rows)
                publisher.bulk_store(
                    folder, manifest["knowledge_version"], rows, keys=publisher_keys(folder)
                )
            else:
                publisher.publish(folder)
    tenants = sorted({str(body["tenant"]) for body in bodies if body.get("tenant")})
    keys = {tenant: store_api_key(state, tenant) for tenant in tenants}

    def credential(body: dict[str, Any]) -> dict[str, str] | None:
        tenant = body.get("tenant")
        return {"Authorization": f"Bearer {keys[tenant]}"} if tenant else None

    host = host_for("queries")
    started = time.perf_counter()
    with host:
        boot_s = time.perf_counter() - started
        heap_booted = host.stats()["heap_bytes"]
        app_import = host.fetch("GET", "/v1/metrics")  # imports the app, reads no package
        heap_app = host.stats()["heap_bytes"]
        if not apart:
            host.publish(folder)
        first = host.fetch("POST", "/v1/query", bodies[0], headers=credential(bodies[0]))
        heap_loaded = host.stats()["heap_bytes"]
        warm = []
        for number, body in enumerate(bodies[1:], start=1):
            warm.append(host.fetch("POST", "/v1/query", body, headers=credential(body)))
            if on_progress is not None:
                on_progress(number)
        final = host.stats()
        heap_after = final["heap_bytes"]
        heap_used_after = int(final.get("heap_used_bytes", 0))
        timings = host.ready.get("timings", {})
    return WorkerRun(
        boot_s,
        timings,
        app_import,
        first,
        warm,
        heap_booted,
        heap_app,
        heap_loaded,
        heap_after,
        heap_used_after,
    )


def publisher_keys(folder: Path) -> dict[str, str]:
    """Each file of a package folder at the blob key the publisher gives it (lazily read files
    under ``packages/_objects/``), so that a bulk-stored package is read as a published one."""
    from router.package.version.layout import package_key

    version = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    return {
        p.name: package_key(version["knowledge_version"], p.name)
        for p in folder.iterdir()
        if p.is_file()
    }


def write_record_rows(folder: Path, out: Path) -> int:
    """The D1 ``knowledge_records`` rows of a package folder as JSONL (what publish writes)."""
    from router.package.format.records import records_in_files
    from router.package.version.manifest import Manifest

    class Folder(dict[str, bytes]):
        def __missing__(self, name: str) -> bytes:
            return (folder / name).read_bytes()

    manifest = Manifest.from_bytes((folder / "manifest.json").read_bytes())
    count = 0
    with out.open("w", encoding="utf-8") as rows:
        for entry in manifest.partitions:
            for doc_index, record in enumerate(records_in_files(Folder(), entry.key)):
                row = {"partition_key": entry.key, "doc_index": doc_index, "record": record}
                rows.write(json.dumps(row, ensure_ascii=False) + "\n")
                count += 1
    return count


def trace_stages(response: WorkerResponse) -> dict[str, dict[str, Any]]:
    """The stages of a response's trace (empty for an error response)."""
    try:
        stages = response.json().get("trace", {}).get("stages", {})
    except ValueError:
        return {}
    return {k: v for k, v in stages.items() if isinstance(v, dict)}


def router_ms(stages: dict[str, dict[str, Any]]) -> float:
    """The router's own time: the sum of the trace's stage times."""
    return float(sum(s.get("ms", 0.0) for s in stages.values()))


def percentile(values: list[float], q: float) -> float | None:
    """The ``q``-th percentile (0–100), interpolated; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def measure(
    name: str, folder: Path, queries: list[str], work: Path, query_log: bool = True
) -> dict[str, Any]:
    bodies = [{"query": query[:2000]} for query in queries]
    run = run_worker(name, folder, bodies, work, query_log)
    assert run.first.status == 200, run.first.body
    warm, router, texts_ms, chunks, text_bytes = [], [], [], [], []
    for response in run.warm:
        assert response.status in (200, 422), response.body
        warm.append(response.ms)
        stages = trace_stages(response)
        router.append(router_ms(stages))
        texts = stages.get("texts", {})
        if "chunks_fetched" in texts:  # format 3: section texts read per query
            texts_ms.append(texts["ms"])
            chunks.append(texts["chunks_fetched"])
            text_bytes.append(texts["bytes_fetched"])
    package_bytes = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    vectors = folder / "vectors.bin"
    return {
        "name": name + ("" if query_log else " (query log off)"),
        "sections": json.loads((folder / "manifest.json").read_text())["counts"]["sections"],
        "package_bytes": package_bytes,
        "package_bytes_in_isolate": package_bytes
        - (vectors.stat().st_size if vectors.exists() else 0),
        "host_boot_s": round(run.boot_s, 2),
        "startup_timings_ms": run.startup_timings_ms,
        "first_request_ms": round(run.app_import.ms, 1),
        "first_query_ms": round(run.first.ms, 1),
        "warm_p50_ms": round(statistics.median(warm), 2),
        "warm_p95_ms": round(statistics.quantiles(warm, n=20)[18], 2),
        "warm_queries": len(warm),
        "router_p50_ms": round(statistics.median(router), 2),
        "router_p95_ms": round(statistics.quantiles(router, n=20)[18], 2),
        "texts_p50_ms": round(statistics.median(texts_ms), 2) if texts_ms else None,
        "text_chunks_fetched_mean": round(statistics.mean(chunks), 2) if chunks else None,
        "text_kib_fetched_mean": round(statistics.mean(text_bytes) / 1024, 1) if chunks else None,
        "heap_booted_bytes": run.heap_booted_bytes,
        "heap_app_bytes": run.heap_app_bytes,
        "heap_loaded_bytes": run.heap_loaded_bytes,
        "heap_after_bytes": run.heap_after_bytes,
    }


def report(rows: list[dict[str, Any]]) -> None:
    print(json.dumps(rows, indent=1))
    print()
    print(
        "| package | sections | package MiB (read by the isolate) | first request ms (app import)"
        " | first query ms (package load) | warm p50 / p95 ms | router's own p50 / p95 ms"
        " | wasm heap MiB: booted → app → package → after all queries"
        " | texts stage p50 ms, chunks / KiB read a query |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['name']} | {r['sections']} | {r['package_bytes'] / MIB:.2f} "
            f"({r['package_bytes_in_isolate'] / MIB:.2f}) | {r['first_request_ms']} | "
            f"{r['first_query_ms']} | {r['warm_p50_ms']} / {r['warm_p95_ms']} | "
            f"{r['router_p50_ms']} / {r['router_p95_ms']} | "
            f"{r['heap_booted_bytes'] / MIB:.0f} → {r['heap_app_bytes'] / MIB:.0f} → "
            f"{r['heap_loaded_bytes'] / MIB:.0f} → {r['heap_after_bytes'] / MIB:.0f} | "
            f"{r.get('texts_p50_ms')}, {r.get('text_chunks_fetched_mean')} / "
            f"{r.get('text_kib_fetched_mean')} |"
        )
    logged = [r for r in rows if "query log off" not in r["name"]]
    if len(logged) >= 2:
        small, big = sorted(logged, key=lambda r: r["sections"])[:2]
        sections = big["sections"] - small["sections"]
        heap_per_section = (big["heap_after_bytes"] - small["heap_after_bytes"]) / sections
        first_ms_per_section = (big["first_query_ms"] - small["first_query_ms"]) / sections
        base_heap = small["heap_after_bytes"] - heap_per_section * small["sections"]
        print()
        limit_sections = (ISOLATE_MEMORY_BYTES - base_heap) / heap_per_section
        print(
            f"heap per section ≈ {heap_per_section / 1024:.1f} KiB; base ≈ {base_heap / MIB:.0f} "
            f"MiB → 128 MB reached at ≈ {limit_sections:,.0f} sections"
        )
        print(
            f"first-query (package load) cost ≈ {first_ms_per_section:.3f} ms per section → 1 s "
            f"at ≈ {STARTUP_LIMIT_MS / first_ms_per_section:,.0f} sections (the load runs in the "
            "first request, not in start-up; start-up is the entry import)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=["sample", "scifact"])
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        builders = {"sample": sample_package, "scifact": scifact_package}
        for name, builder in builders.items():
            if args.only and name != args.only:
                continue
            folder, queries = builder(work / name)
            rows.append(measure(name, folder, queries, work))
            # The local D1 behind getPlatformProxy blocks Node on every prepare/bind, so the
            # query-log batch (every 10 queries) shows up in p95 here; off, for comparison.
            rows.append(measure(name, folder, queries, work, query_log=False))
            print(f"{name}: done", file=sys.stderr, flush=True)
    report(rows)


if __name__ == "__main__":
    main()
