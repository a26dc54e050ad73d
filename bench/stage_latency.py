"""p50/p95 latency per path of the cascade on the sample knowledge (golden queries, warm).

Paths: cache hit (second pass), exact hit, BM25 (lexical only), hybrid (vector fallback ran;
reported with and without the embedder call). Prints the PRD SLO and a tenth of it side by side.

    python bench/stage_latency.py [--rounds 3] [--embedder e5|hash]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kr.golden import DEFAULT_GOLDEN, load_golden
from router.adapters.local.embedders import embedder_by_name
from router.adapters.local.vector_index import LocalVectorIndex
from router.compile.build import build_knowledge
from router.package.reader import load_package
from router.pipeline import CascadeServices, run_cascade
from router.stages.cache import QueryCache
from router.sync import run_sync
from router.vectors.records import section_records

ROOT = Path(__file__).resolve().parents[1]
SLO_MS = {"cache": 20, "exact": 30, "bm25": 80, "hybrid": 150, "hybrid excl. embedder": 150}


class TimedEmbedder:
    """Wraps the embedder to subtract its time from the hybrid path."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.model_id, self.dimensions = inner, inner.model_id, inner.dimensions
        self.last_ms = 0.0

    async def embed(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        started = time.perf_counter()
        rows = await self.inner.embed(texts, kind)
        self.last_ms = (time.perf_counter() - started) * 1000
        return rows


async def measure(rounds: int, embedder_name: str) -> dict[str, list[float]]:
    inner = embedder_by_name(embedder_name)
    files = build_knowledge(ROOT / "knowledge", encoder=inner).package.files()
    package = load_package(files["manifest.json"], files.__getitem__)
    index = LocalVectorIndex(inner.dimensions)
    index.upsert_many(run_sync(section_records(package)))
    embedder = TimedEmbedder(inner)
    requests = [
        q.request.model_copy(update={"top_k": None}) for q in load_golden(ROOT / DEFAULT_GOLDEN)
    ]
    timings: dict[str, list[float]] = defaultdict(list)
    for _ in range(rounds):
        cache = QueryCache(4096)
        services = CascadeServices(embedder=embedder, vector_index=index, cache=cache)
        for request in requests:
            started = time.perf_counter()
            response = await run_cascade(package, request, None, services, today="2026-06-15")
            ms = (time.perf_counter() - started) * 1000
            stages = response.trace["stages"]
            if response.metadata.fallback_triggered:
                timings["hybrid"].append(ms)
                timings["hybrid excl. embedder"].append(ms - embedder.last_ms)
            elif "skipped" not in stages["exact"] and stages["exact"]["hits"]:
                timings["exact"].append(ms)
            else:
                timings["bm25"].append(ms)
        for request in requests:  # second pass: every answer is in the cache
            started = time.perf_counter()
            response = await run_cascade(package, request, None, services, today="2026-06-15")
            timings["cache"].append((time.perf_counter() - started) * 1000)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--embedder", default="e5")
    args = parser.parse_args()
    timings = asyncio.run(measure(args.rounds, args.embedder))
    print(f"{'path':24s} {'n':>5s} {'p50 ms':>8s} {'p95 ms':>8s} {'SLO/10':>7s}")
    for path in ("cache", "exact", "bm25", "hybrid excl. embedder", "hybrid"):
        values = sorted(timings.get(path, []))
        if not values:
            continue
        p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
        print(
            f"{path:24s} {len(values):5d} {statistics.median(values):8.2f} {p95:8.2f} "
            f"{SLO_MS[path] / 10:7.1f}"
        )


if __name__ == "__main__":
    main()
