"""Embed a BEIR collection (all queries, then every document) into the local vector cache.

Why a separate job: e5-small needs ~40 min for SciFact's 5,183 abstracts on two cores, so the
vectors are computed once, cached outside the repository (``KR_VECTOR_CACHE``, default
``~/.cache/knowledge-router/vectors``) and reused by ``bench/retrieval_quality.py`` and builds.

    python bench/embed_collection.py ../shared/data/faquad-ir ../shared/data/scifact
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from kr.beir_eval import cascade_query_text
from router.adapters.local.e5_embedder import E5Embedder
from router.compile.beir import load_beir
from router.compile.vector_cache import VectorCache
from router.vectors.passages import passage_text


def embed_collection(folder: Path, embedder: E5Embedder, cache: VectorCache) -> None:
    collection = load_beir(folder)
    with (folder / "queries.jsonl").open(encoding="utf-8") as handle:
        # the vector stage embeds the normalized, bounded query (as the model cuts it), so
        # that is the text cached; kr.beir_eval.plan_vectors checks the same form
        queries = [cascade_query_text(json.loads(line)["text"], embedder) for line in handle]
    passages = [passage_text(doc, doc.sections[0]) for doc in collection.documents]
    for kind, texts in (("query", queries), ("passage", passages)):
        started, done = time.perf_counter(), 0

        def progress(
            count: int, kind: str = kind, total: int = len(texts), started: float = started
        ) -> None:
            nonlocal done
            done += count
            rate = done / (time.perf_counter() - started)
            print(f"{folder.name} {kind}: {done}/{total} new ({rate:.1f}/s)", flush=True)

        cache.embed(kind, texts, lambda batch, k=kind: embedder.encode(batch, k), progress=progress)
    print(f"{folder.name}: {len(cache)} vectors cached in {cache.folder}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args()
    embedder = E5Embedder()
    cache = VectorCache(embedder.model_id, embedder.dimensions)
    for folder in args.folders:
        embed_collection(folder, embedder, cache)


if __name__ == "__main__":
    main()
