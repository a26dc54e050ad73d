"""``kr``: build, query, serve and evaluate a knowledge base on the embedded local default.

Why a thin CLI: every command is a few calls into the router core and the local adapters, so the
CLI, the HTTP API and the Worker exercise the same code.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import sys
from pathlib import Path

from router.adapters.local.embedders import EMBEDDER_CHOICES, embedder_by_name, embedder_for_model
from router.adapters.local.state import LocalState, default_state_dir
from router.adapters.local.vector_index import LocalVectorIndex
from router.compile.build import build_knowledge, write_package
from router.contract import QueryRequest
from router.errors import KnowledgeFormatError, NoActiveVersionError, RouterError
from router.publisher import publish_package
from router.service import KnowledgeService
from router.stages.cache import QueryCache

__all__ = ["main"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787
DEFAULT_GOLDEN = "eval/golden.jsonl"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kr", description="Knowledge Router (local default)")
    sub = parser.add_subparsers(dest="command", required=True)

    def state_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--state", type=Path, default=None, help="state folder ($KR_STATE)")

    build = sub.add_parser("build", help="compile a knowledge folder and activate it")
    build.add_argument("knowledge_dir", type=Path)
    state_arg(build)
    build.add_argument("--strict", action="store_true", help="fail on any malformed file")
    build.add_argument("--out", type=Path, help="also write the package files here")
    build.add_argument("--no-activate", action="store_true", help="publish without activating")
    build.add_argument(
        "--embedder",
        choices=EMBEDDER_CHOICES,
        default="e5",
        help="section vectors for the vector fallback (default e5: multilingual-e5-small)",
    )

    query = sub.add_parser("query", help="ask the active knowledge version")
    query.add_argument("text")
    state_arg(query)
    for name in ("tenant", "page", "tab", "focus"):
        query.add_argument(f"--{name}")
    query.add_argument("--date", type=dt.date.fromisoformat, help="YYYY-MM-DD")
    query.add_argument("--top-k", type=int, default=None, help="default: adaptive (3/8/15)")
    query.add_argument("--trace", action="store_true", help="print the stage trace")
    query.add_argument("--json", action="store_true", help="print the QueryResponse as JSON")

    serve = sub.add_parser("serve", help="serve the HTTP API")
    state_arg(serve)
    serve.add_argument("--host", default=DEFAULT_HOST)
    serve.add_argument("--port", type=int, default=DEFAULT_PORT)

    evaluate = sub.add_parser("eval", help="run a golden set against the active version")
    evaluate.add_argument("golden", nargs="?", type=Path, default=Path(DEFAULT_GOLDEN))
    state_arg(evaluate)
    evaluate.add_argument("--json", action="store_true", help="print metrics as JSON")
    evaluate.add_argument("--failures", action="store_true", help="list the missed queries")
    return parser


def _state(path: Path | None) -> LocalState:
    return LocalState(path or default_state_dir())


async def _service(path: Path | None, cache: bool = True) -> KnowledgeService:
    """The local default: SQLite KV + folder blobs, in-process vector index, matching embedder,
    LRU + KV query cache; the active package (and its vectors) is loaded here, once."""
    state = _state(path)
    service = KnowledgeService(
        kv=state.kv,
        blobs=state.blobs,
        cache=QueryCache(1024, state.kv) if cache else None,
        load_vectors_on_activation=True,
    )
    try:
        manifest = await service.active_manifest()
    except NoActiveVersionError:
        return service
    if manifest.embedding:
        service.embedder = embedder_for_model(manifest.embedding.get("model"))
        service.vector_index = LocalVectorIndex(int(manifest.embedding["dimensions"]))
    return service


async def _build(args: argparse.Namespace) -> int:
    encoder = embedder_by_name(args.embedder)
    result = build_knowledge(args.knowledge_dir, strict=args.strict, encoder=encoder)
    for diagnostic in result.corpus.diagnostics:
        print(diagnostic, file=sys.stderr)
    package = result.package
    if args.out:
        print(f"package written to {write_package(package, args.out)}")
    state = _state(args.state)
    version = await publish_package(
        package.files(), state.blobs, state.kv, state.relational, not args.no_activate
    )
    counts = ", ".join(f"{v} {k}" for k, v in package.manifest.counts.items())
    verb = "published" if args.no_activate else "active"
    print(f"knowledge version {version} {verb} in {state.root} ({counts})")
    return 0


async def _query(args: argparse.Namespace) -> int:
    request = QueryRequest(
        query=args.text,
        tenant=args.tenant,
        page=args.page,
        tab=args.tab,
        focus=args.focus,
        date=args.date,
        top_k=args.top_k,
    )
    response = await (await _service(args.state)).query(request)
    if args.json:
        print(response.model_dump_json(indent=2))
        return 0
    print(response.answer)
    print(
        f"\nconfidence {response.confidence_level} ({response.confidence:.2f}) · "
        f"intent {response.analysis.intent} · {response.knowledge_version}"
    )
    for rank, result in enumerate(response.results, start=1):
        print(f"{rank:>2}. {result.section_id}  {result.final_score:.3f}  {result.title}")
    if args.trace:
        print(json.dumps(response.trace, ensure_ascii=False, indent=1))
    return 0


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from router.api.app import create_app

    app = create_app(asyncio.run(_service(args.state)))
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0


async def _eval(args: argparse.Namespace) -> int:
    from kr.evaluation import evaluate, load_golden

    service = await _service(args.state, cache=False)
    report = await evaluate(load_golden(args.golden), service.query)
    if args.json:
        print(json.dumps({"overall": report.overall, "per_category": report.per_category}))
    else:
        print(report.table())
        print("metrics:", json.dumps(service.metrics.snapshot(), ensure_ascii=False))
    if args.failures:
        for failure in report.failures:
            print(json.dumps(failure, ensure_ascii=False))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "serve":
            return _serve(args)
        handler = {"build": _build, "query": _query, "eval": _eval}[args.command]
        return asyncio.run(handler(args))
    except KnowledgeFormatError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    except RouterError as exc:
        print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
