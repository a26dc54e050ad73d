"""Golden-set quality of cascade variants side by side (tuning aid; golden set = training data).

python bench/golden_variants.py            # lexical variants, hash vectors
python bench/golden_variants.py --e5       # plus the e5-small vector fallback
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
from pathlib import Path
from typing import Any

from kr.evaluation import evaluate
from kr.golden import DEFAULT_GOLDEN, load_golden
from router.adapters.local.vector_index import LocalVectorIndex
from router.compile.build import build_knowledge
from router.compile.indexer import BuildConfig
from router.config import RouterConfig
from router.package.reader import KnowledgePackage, load_package
from router.pipeline import CascadeServices, run_cascade
from router.vectors.records import section_records

ROOT = Path(__file__).resolve().parents[1]
TODAY = "2026-06-15"


def load(scoring: str, encoder: Any) -> KnowledgePackage:
    built = build_knowledge(ROOT / "knowledge", BuildConfig(scoring=scoring), encoder=encoder)
    files = built.package.files()
    return load_package(files["manifest.json"], files.__getitem__)


async def run_variant(
    package: KnowledgePackage, config: RouterConfig, embedder: Any
) -> dict[str, Any]:
    services = CascadeServices()
    if embedder is not None:
        index = LocalVectorIndex(embedder.dimensions)
        await index.upsert(await section_records(package))
        services = CascadeServices(embedder=embedder, vector_index=index)

    async def answer(request):  # type: ignore[no-untyped-def]
        return await run_cascade(package, request, config, services, today=TODAY)

    report = await evaluate(load_golden(ROOT / DEFAULT_GOLDEN), answer)
    return {"overall": report.overall, "per_category": report.per_category, "table": report.table}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--e5", action="store_true")
    parser.add_argument("--set", action="append", default=[], help="config field=value")
    parser.add_argument("--scoring", default="bm25f")
    parser.add_argument("--table", action="store_true")
    args = parser.parse_args()
    embedder: Any = None
    if args.e5:
        from router.adapters.local.e5_embedder import E5Embedder

        embedder = E5Embedder()
    package = load(args.scoring, embedder)
    overrides: dict[str, Any] = {}
    for item in args.set:
        name, value = item.split("=", 1)
        overrides[name] = (
            type(getattr(RouterConfig(), name))(
                value if not value.replace(".", "").isdigit() else float(value)
            )
            if not isinstance(getattr(RouterConfig(), name), bool)
            else value == "true"
        )
    config = dataclasses.replace(RouterConfig(), **overrides)
    result = asyncio.run(run_variant(package, config, embedder))
    o = result["overall"]
    print(
        f"scoring={args.scoring} e5={args.e5} {args.set}: hit@1 {o['hit@1']:.3f} "
        f"hit@3 {o['hit@3']:.3f} mrr {o['mrr']:.3f} abst {o['abstention_acc']:.3f} "
        f"leaks {o['forbidden_leaks']:.0f}"
    )
    if args.table:
        print(result["table"]())


if __name__ == "__main__":
    main()
