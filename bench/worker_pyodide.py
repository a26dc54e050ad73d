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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.pyodide.client import PyodideHost, run_wrangler  # noqa: E402

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


def measure(
    name: str, folder: Path, queries: list[str], work: Path, query_log: bool = True
) -> dict[str, Any]:
    state = work / f"state-{name}-{query_log}"
    run_wrangler(
        ["d1", "migrations", "apply", "KNOWLEDGE_DB", "--local", "--persist-to", str(state)]
    )
    host = PyodideHost(
        persist_to=state,
        log=work / f"host-{name}.log",
        vectorize={"dimensions": 256},
        vars={"KR_QUERY_LOG": "on" if query_log else "off"},
    )
    started = time.perf_counter()
    with host:
        boot_s = time.perf_counter() - started
        heap_booted = host.stats()["heap_bytes"]
        app_import = host.fetch("GET", "/v1/health")  # no version yet: imports the app only
        heap_app = host.stats()["heap_bytes"]
        host.publish(folder)
        first = host.fetch("POST", "/v1/query", {"query": queries[0]})
        assert first.status == 200, first.body
        heap_loaded = host.stats()["heap_bytes"]
        warm, router_ms, texts_ms, chunks, text_bytes = [], [], [], [], []
        for query in queries[1:]:
            response = host.fetch("POST", "/v1/query", {"query": query[:2000]})
            assert response.status in (200, 422), response.body
            warm.append(response.ms)
            stages = response.json().get("trace", {}).get("stages", {})
            router_ms.append(sum(s.get("ms", 0.0) for s in stages.values() if isinstance(s, dict)))
            texts = stages.get("texts", {})
            if "chunks_fetched" in texts:  # format 3: section texts read per query
                texts_ms.append(texts["ms"])
                chunks.append(texts["chunks_fetched"])
                text_bytes.append(texts["bytes_fetched"])
        heap_after = host.stats()["heap_bytes"]
        timings = host.ready.get("timings", {})
    package_bytes = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    vectors = folder / "vectors.bin"
    return {
        "name": name + ("" if query_log else " (query log off)"),
        "sections": json.loads((folder / "manifest.json").read_text())["counts"]["sections"],
        "package_bytes": package_bytes,
        "package_bytes_in_isolate": package_bytes
        - (vectors.stat().st_size if vectors.exists() else 0),
        "host_boot_s": round(boot_s, 2),
        "startup_timings_ms": timings,
        "first_request_ms": round(app_import.ms, 1),
        "first_query_ms": round(first.ms, 1),
        "warm_p50_ms": round(statistics.median(warm), 2),
        "warm_p95_ms": round(statistics.quantiles(warm, n=20)[18], 2),
        "warm_queries": len(warm),
        "router_p50_ms": round(statistics.median(router_ms), 2),
        "router_p95_ms": round(statistics.quantiles(router_ms, n=20)[18], 2),
        "texts_p50_ms": round(statistics.median(texts_ms), 2) if texts_ms else None,
        "text_chunks_fetched_mean": round(statistics.mean(chunks), 2) if chunks else None,
        "text_kib_fetched_mean": round(statistics.mean(text_bytes) / 1024, 1) if chunks else None,
        "heap_booted_bytes": heap_booted,
        "heap_app_bytes": heap_app,
        "heap_loaded_bytes": heap_loaded,
        "heap_after_bytes": heap_after,
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
