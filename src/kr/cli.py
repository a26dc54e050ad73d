"""``kr``: build, query, serve and evaluate a knowledge base on the embedded local default.

Why a thin CLI: every command is a few calls into the router core and the local adapters, so the
CLI, the HTTP API and the Worker exercise the same code.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import sys
from pathlib import Path

from kr.answering import package_folder_files
from kr.gate import DEFAULT_GOLDEN, GATE_BLOCKED_EXIT, GateSettings
from router.adapters.local.embedders import EMBEDDER_CHOICES, embedder_by_name, embedder_for_model
from router.adapters.local.state import LocalState, default_state_dir
from router.adapters.local.vector_index import LocalVectorIndex
from router.compile.build import build_knowledge, write_package
from router.config import DEFAULT_CACHE_ENTRIES
from router.contract import QueryRequest
from router.errors import (
    ConfigError,
    KnowledgeFormatError,
    NoActiveVersionError,
    QualityGateError,
    RouterError,
)
from router.package.fetch import fetch_package_files, is_version_id
from router.package.manifest import MANIFEST_NAME, Manifest
from router.ports import ACTIVE_VERSION_KEY, Embedder, PublishJournal, VectorIndex
from router.publisher import PublishReport, PublishTarget, publish_package
from router.service import KnowledgeService, package_key
from router.stages.cache import QueryCache

__all__ = ["main"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787
DEFAULT_WRANGLER_TOML = Path("wrangler.toml")
ENVIRONMENTS = ("dev", "production")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kr", description="Knowledge Router (local default)")
    sub = parser.add_subparsers(dest="command", required=True)

    def state_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--state", type=Path, default=None, help="state folder ($KR_STATE)")

    def gate_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--golden", type=Path, default=DEFAULT_GOLDEN, help="gate: golden set")
        p.add_argument(
            "--extra",
            type=Path,
            action="append",
            default=[],
            help="gate: also compare on this BEIR folder (repeatable)",
        )
        p.add_argument("--split", default="test", help="gate: qrels split of the extra sets")
        p.add_argument(
            "--tolerance",
            action="append",
            default=[],
            metavar="METRIC=MAX_DROP",
            help="gate: override a tolerance, e.g. hit@1=0.02 (repeatable)",
        )
        p.add_argument("--today", help="gate: ask the queries on this day (YYYY-MM-DD)")

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
    build.add_argument(
        "--force",
        action="store_true",
        help="activate without the quality gate (the forced activation is logged)",
    )
    gate_args(build)

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

    pub = sub.add_parser(
        "publish",
        help="send a built package to Cloudflare (R2, D1, Vectorize, then KV activation)",
        description="Publish a package: blobs to R2, rows to D1, vectors to Vectorize, then the "
        "KV switch, last. Resumable: finished steps are journaled in the state folder, so "
        "running the same command again continues where it stopped, and does nothing once done.",
    )
    pub.add_argument(
        "package",
        nargs="?",
        help="package folder (with manifest.json, as written by `kr build --out`) or a "
        "version in the local state; default: the version `kr build` activated",
    )
    state_arg(pub)
    pub.add_argument(
        "--local",
        action="store_true",
        help="write into wrangler's local state with `wrangler … --local` (no Vectorize)",
    )
    pub.add_argument("--env", choices=ENVIRONMENTS, help="wrangler environment ([env.NAME])")
    pub.add_argument("--no-activate", action="store_true", help="publish without activating")
    pub.add_argument(
        "--force",
        action="store_true",
        help="activate without the quality gate (the forced activation is logged)",
    )
    gate_args(pub)
    pub.add_argument(
        "--api-base",
        help="Cloudflare API base URL ($CLOUDFLARE_API_BASE_URL; default: the real one)",
    )
    pub.add_argument("--config", type=Path, help="wrangler.toml (default: ./wrangler.toml)")
    pub.add_argument("--persist-to", type=Path, help="with --local: wrangler's state folder")
    pub.add_argument("--account-id", help="Cloudflare account ($CLOUDFLARE_ACCOUNT_ID)")
    pub.add_argument("--bucket", help="R2 bucket ($KR_R2_BUCKET)")
    pub.add_argument("--kv-namespace-id", help="KV namespace id ($KR_KV_NAMESPACE_ID)")
    pub.add_argument("--d1-database-id", help="D1 database id ($KR_D1_DATABASE_ID)")
    pub.add_argument("--vectorize-index", help="Vectorize index name ($KR_VECTORIZE_INDEX)")

    evaluate = sub.add_parser(
        "eval",
        help="evaluate the golden set or a BEIR folder; writes reports/<set>/",
        description="Golden set (JSONL) against the active version (or --package), or a "
        "BEIR-layout folder compiled in memory: ranx metrics, abstention, per category and "
        "path, stage latency. Writes metrics.json, report.md and plots under reports/<set>/.",
    )
    evaluate.add_argument(
        "target",
        nargs="?",
        type=Path,
        default=DEFAULT_GOLDEN,
        help=f"golden set .jsonl or BEIR folder (default {DEFAULT_GOLDEN})",
    )
    state_arg(evaluate)
    evaluate.add_argument("--package", type=Path, help="golden: evaluate this package folder")
    evaluate.add_argument("--split", default="test", help="BEIR: qrels split (default test)")
    evaluate.add_argument(
        "--embedder",
        choices=EMBEDDER_CHOICES,
        default="e5",
        help="BEIR: section vectors (default e5, from the vector cache; falls back to none "
        "with a note when they are not cached)",
    )
    evaluate.add_argument(
        "--embed-missing",
        action="store_true",
        help="BEIR: embed vectors missing from the cache, however long it takes",
    )
    evaluate.add_argument(
        "--variant",
        choices=("cascade", "bm25", "vector", "rrf"),
        default="cascade",
        help="BEIR: cascade (default), BM25 only, vectors only, or always hybrid (RRF)",
    )
    evaluate.add_argument("--language", choices=("portuguese", "english"), help="BEIR analyzer")
    evaluate.add_argument("--today", help="golden: ask the queries on this day (YYYY-MM-DD)")
    evaluate.add_argument("--report-dir", type=Path, help="default: reports/<set>")
    evaluate.add_argument("--no-report", action="store_true", help="write no report files")
    evaluate.add_argument("--json", action="store_true", help="print metrics as JSON")
    evaluate.add_argument("--failures", action="store_true", help="list the missed queries")

    gate = sub.add_parser(
        "gate",
        help="compare a built package with the active version (exit 3 if worse)",
        description="Evaluate CANDIDATE (a folder from `kr build --out`, or a version in the "
        "state) and the active version on the golden set and any --extra BEIR folder; a "
        "metric worse than its tolerance blocks (exit status 3) with the list of queries that "
        "got worse.",
    )
    gate.add_argument("candidate", help="package folder or knowledge version")
    state_arg(gate)
    gate_args(gate)
    gate.add_argument("--activate", action="store_true", help="activate the candidate if it passes")
    gate.add_argument("--json", action="store_true", help="print the comparison as JSON")

    back = sub.add_parser("rollback", help="activate the previous knowledge version")
    state_arg(back)
    back.add_argument(
        "--env", choices=ENVIRONMENTS, help="roll back on Cloudflare (wrangler [env.NAME])"
    )
    back.add_argument("--api-base", help="Cloudflare API base URL (implies a remote rollback)")
    back.add_argument("--config", type=Path, help="wrangler.toml (default: ./wrangler.toml)")
    return parser


def _state(path: Path | None) -> LocalState:
    return LocalState(path or default_state_dir())


def _vector_stage(manifest: Manifest) -> tuple[Embedder | None, VectorIndex | None]:
    """The local embedder of the package's model and an in-process index of its dimensions
    (a :data:`~router.service.VectorStageFactory`); (None, None) without a matching embedder."""
    embedding = manifest.embedding
    if not embedding:
        return None, None
    embedder = embedder_for_model(embedding.get("model"))
    if embedder is None:
        return None, None
    return embedder, LocalVectorIndex(int(embedding["dimensions"]))


def _service(path: Path | None, cache: bool = True) -> KnowledgeService:
    """The local default: SQLite KV + folder blobs, in-process vector index, LRU + KV query
    cache; the vector stage is picked per loaded package, as in the Worker."""
    state = _state(path)
    return KnowledgeService(
        kv=state.kv,
        blobs=state.blobs,
        cache=QueryCache(DEFAULT_CACHE_ENTRIES, state.kv) if cache else None,
        load_vectors_on_activation=True,
        vector_stage=_vector_stage,
    )


async def _build(args: argparse.Namespace) -> int:
    encoder = embedder_by_name(args.embedder)
    result = build_knowledge(args.knowledge_dir, strict=args.strict, encoder=encoder)
    for diagnostic in result.corpus.diagnostics:
        print(diagnostic, file=sys.stderr)
    package = result.package
    if args.out:
        print(f"package written to {write_package(package, args.out)}")
    state = _state(args.state)
    if args.no_activate:
        version = await publish_package(
            package.files(), state.blobs, state.kv, state.relational, activate_now=False
        )
    else:
        from kr.commands import activate_gated

        version, _ = await activate_gated(
            package.files(), state, force=args.force, settings=_gate_settings(args), command="build"
        )
    counts = ", ".join(f"{v} {k}" for k, v in package.manifest.counts.items())
    verb = "published" if args.no_activate else "active"
    print(f"knowledge version {version} {verb} in {state.root} ({counts})")
    return 0


async def _package_files(spec: str | None, state_root: Path | None) -> dict[str, bytes]:
    """The files of the package to publish: a folder, a version of the local state, or the
    version active in the local state (what ``kr build`` last activated)."""
    if spec and Path(spec).is_dir():
        return package_folder_files(Path(spec))
    if spec and not is_version_id(spec):
        raise ConfigError(f"{spec!r} is neither a package folder nor a knowledge version")
    state = _state(state_root)
    version = spec or await state.kv.get(ACTIVE_VERSION_KEY)
    if not version:
        raise NoActiveVersionError(
            f"nothing to publish: no version is active in {state.root}; run `kr build` first "
            "or pass a package folder"
        )
    if await state.blobs.get(package_key(version, MANIFEST_NAME)) is None:
        raise ConfigError(f"{version!r} is neither a package folder nor a version in {state.root}")

    async def get(name: str) -> bytes | None:
        return await state.blobs.get(package_key(version, name))

    return await fetch_package_files(get, f"version {version} in {state.root}")


def _print_step(step: str, status: str) -> None:
    if status == "done":
        print(f"  done  {step}", flush=True)
    elif status == "skip":
        print(f"  skip  {step} (already done)", flush=True)


async def _publish(args: argparse.Namespace) -> int:
    from router.adapters.local.journal import JOURNAL_DIR, FileJournal

    if args.persist_to and not args.local:
        raise ConfigError("--persist-to is for --local (wrangler's local state)")
    remote_only = [
        flag
        for flag, value in (
            ("--api-base", args.api_base),
            ("--account-id", args.account_id),
            ("--bucket", args.bucket),
            ("--kv-namespace-id", args.kv_namespace_id),
            ("--d1-database-id", args.d1_database_id),
            ("--vectorize-index", args.vectorize_index),
        )
        if value
    ]
    if args.local and remote_only:
        raise ConfigError(f"{remote_only[0]} is for remote publishing, not --local")
    files = await _package_files(args.package, args.state)
    manifest = Manifest.from_bytes(files[MANIFEST_NAME])
    journal = FileJournal((args.state or default_state_dir()) / JOURNAL_DIR)
    activate_now = not args.no_activate
    if args.local:
        target, where = _wrangler_target(args)
        print(f"publishing {manifest.knowledge_version} to {where}", flush=True)
        report = await _gated_publish(args, files, target, journal, activate_now)
    else:
        report, where = await _publish_remote(args, files, manifest, journal, activate_now)
    if report.vectors_skipped:
        print(
            f"note: Vectorize has no local mode in wrangler; {report.vectors_skipped} section "
            "vectors were not upserted (publish without --local to send them to Vectorize)"
        )
    _print_outcome(report, where)
    return 0


async def _gated_publish(
    args: argparse.Namespace,
    files: dict[str, bytes],
    target: PublishTarget,
    journal: PublishJournal,
    activate_now: bool,
) -> PublishReport:
    """The quality gate before the activation step (kr.commands.gated_publish)."""
    from kr.commands import gated_publish
    from kr.gate import ActivationLog

    return await gated_publish(
        files,
        target,
        journal,
        activate_now=activate_now,
        force=args.force,
        settings=_gate_settings(args),
        log=ActivationLog(args.state or default_state_dir()),
        on_step=_print_step,
    )


def _wrangler_target(args: argparse.Namespace) -> tuple[PublishTarget, str]:
    from router.adapters.cloudflare_api.config import (
        D1_BINDING,
        KV_BINDING,
        read_wrangler_bindings,
    )
    from router.adapters.wrangler_cli import (
        Wrangler,
        WranglerD1Store,
        WranglerKVStore,
        WranglerR2Store,
        find_wrangler,
    )

    config = (args.config or DEFAULT_WRANGLER_TOML).resolve()
    bindings = read_wrangler_bindings(config, args.env, strict_env=False)
    if not bindings.bucket:
        raise ConfigError(
            f"{bindings.source} declares no R2 bucket for the KNOWLEDGE_BUCKET binding"
        )
    persist = args.persist_to.resolve() if args.persist_to else None
    wrangler = Wrangler(find_wrangler(config.parent, os.environ), config, persist, args.env)
    target = PublishTarget(
        name=wrangler.state_name,
        blobs=WranglerR2Store(wrangler, bindings.bucket),
        kv=WranglerKVStore(wrangler, KV_BINDING),
        relational=WranglerD1Store(wrangler, D1_BINDING),
    )
    where = f"wrangler's local state ({persist or config.parent / '.wrangler' / 'state'})"
    return target, where


async def _publish_remote(
    args: argparse.Namespace,
    files: dict[str, bytes],
    manifest: Manifest,
    journal: PublishJournal,
    activate_now: bool,
) -> tuple[PublishReport, str]:
    from router.adapters.cloudflare_api import (
        CloudflareAPI,
        CloudflareSettings,
        D1Database,
        D1RelationalStore,
        KVNamespaceStore,
        R2ObjectStore,
        VectorizeIndex,
    )

    config = args.config or (DEFAULT_WRANGLER_TOML if DEFAULT_WRANGLER_TOML.exists() else None)
    settings = CloudflareSettings.resolve(
        wrangler_toml=config,
        env=args.env,
        environ=os.environ,
        options={
            "account_id": args.account_id,
            "bucket": args.bucket,
            "kv_namespace_id": args.kv_namespace_id,
            "d1_database_id": args.d1_database_id,
            "vectorize_index": args.vectorize_index,
            "base_url": args.api_base,
        },
    )
    if manifest.embedding and not settings.vectorize_index:
        raise ConfigError(
            "the package has section vectors but no Vectorize index is configured: declare the "
            "KNOWLEDGE_VECTORS binding in wrangler.toml, or pass --vectorize-index"
        )
    where = (
        f"Cloudflare account {settings.account_id} (R2 {settings.bucket}, "
        f"KV {settings.kv_namespace_id}, D1 {settings.d1_database_id}"
        + (f", Vectorize {settings.vectorize_index})" if settings.vectorize_index else ")")
    )
    print(f"publishing {manifest.knowledge_version} to {where}", flush=True)
    async with CloudflareAPI(settings.account_id, settings.api_token, settings.base_url) as api:
        vectors = None
        if manifest.embedding and settings.vectorize_index:
            dimensions = int(manifest.embedding["dimensions"])
            vectors = VectorizeIndex(api, settings.vectorize_index, dimensions)
        target = PublishTarget(
            name=settings.target_name,
            blobs=R2ObjectStore(api, settings.bucket),
            kv=KVNamespaceStore(api, settings.kv_namespace_id),
            relational=D1RelationalStore(D1Database(api, settings.d1_database_id)),
            vectors=vectors,
        )
        report = await _gated_publish(args, files, target, journal, activate_now)
    return report, where


def _print_outcome(report: PublishReport, where: str) -> None:
    version = report.version
    if report.nothing_to_do:
        state = "active" if "activate" in report.steps else "published"
        print(f"knowledge version {version} was already {state} on {where}: nothing to do")
    elif report.activated:
        previous = f" (previous: {report.previous_version})" if report.previous_version else ""
        print(f"knowledge version {version} active on {where}{previous}")
    else:
        print(
            f"knowledge version {version} published to {where}, not activated "
            f"(`kr publish {version}` without --no-activate activates it)"
        )


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
    response = await _service(args.state).query(request)
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

    app = create_app(_service(args.state))
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0


async def _eval(args: argparse.Namespace) -> int:
    from kr.commands import EvalRequest, eval_command, write_eval_report

    request = EvalRequest(
        target=args.target,
        state=args.state,
        package=args.package,
        split=args.split,
        embedder=args.embedder,
        embed_missing=args.embed_missing,
        variant=args.variant,
        language=args.language,
        today=args.today,
    )
    report = await eval_command(request)
    if not args.no_report:
        written = write_eval_report(report, request, args.report_dir)
        print(f"report written to {written}", file=sys.stderr)
    if args.json:
        keys = ("info", "overall", "per_category", "by_path", "operations")
        print(json.dumps({k: report.to_json()[k] for k in keys}, ensure_ascii=False))
    else:
        print(report.table())
        print("operations:", json.dumps(report.operations, ensure_ascii=False))
    if args.failures:
        for failure in report.failures:
            print(json.dumps(failure, ensure_ascii=False))
    return 0


def _gate_settings(args: argparse.Namespace) -> GateSettings:
    from kr.gate import parse_tolerances

    return GateSettings(
        tolerances=parse_tolerances(args.tolerance),
        golden=args.golden,
        extra=tuple(args.extra),
        split=args.split,
        today=args.today,
    )


async def _gate(args: argparse.Namespace) -> int:
    from kr.commands import gate_command

    state = _state(args.state)
    decision = await gate_command(
        args.candidate, state, _gate_settings(args), activate_now=args.activate
    )
    if args.json and decision.report is not None:
        print(json.dumps(decision.report.to_json(), ensure_ascii=False))
    verb = "activated" if args.activate and decision.reason != "already active" else "may go live"
    print(f"gate: {decision.reason} (active before: {decision.baseline or 'none'}); {verb}")
    return 0


async def _rollback(args: argparse.Namespace) -> int:
    from kr.commands import rollback_command

    if args.env or args.api_base:
        return await _rollback_remote(args)
    state = _state(args.state)
    now, before = await rollback_command(state)
    print(
        f"knowledge version {now} active in {state.root} (rolled back from {before}; "
        "`kr rollback` again returns to it)"
    )
    return 0


async def _rollback_remote(args: argparse.Namespace) -> int:
    """The previous version back on Cloudflare: verified from R2, then the KV switch."""
    from kr.gate import rollback
    from router.adapters.cloudflare_api import (
        CloudflareAPI,
        CloudflareSettings,
        KVNamespaceStore,
        R2ObjectStore,
    )

    config = args.config or (DEFAULT_WRANGLER_TOML if DEFAULT_WRANGLER_TOML.exists() else None)
    settings = CloudflareSettings.resolve(
        wrangler_toml=config, env=args.env, environ=os.environ, options={"base_url": args.api_base}
    )
    async with CloudflareAPI(settings.account_id, settings.api_token, settings.base_url) as api:
        kv = KVNamespaceStore(api, settings.kv_namespace_id)
        now, before = await rollback(kv, R2ObjectStore(api, settings.bucket))
    print(
        f"knowledge version {now} active on Cloudflare account {settings.account_id} "
        f"(rolled back from {before}; the Worker serves it within its version TTL)"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "serve":
            return _serve(args)
        handler = {
            "build": _build,
            "query": _query,
            "eval": _eval,
            "publish": _publish,
            "gate": _gate,
            "rollback": _rollback,
        }
        return asyncio.run(handler[args.command](args))
    except QualityGateError as exc:
        print(exc.details)
        print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
        return GATE_BLOCKED_EXIT
    except KnowledgeFormatError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    except RouterError as exc:
        print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        if args.command == "publish":
            print("interrupted: run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
