"""``kr``: the command-line table of the Knowledge Router, its dispatch and its exit statuses.

Why a thin CLI: every command is a few calls into the router core and the local adapters, so the
CLI, the HTTP API and the Worker exercise the same code. Each command lives in its own module
under ``kr.commands``; this one only parses the arguments and maps errors to exit statuses.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeAlias

from kr.beir_eval import DEFAULT_SPLIT, DEFAULT_VARIANT, LANGUAGES, VARIANTS
from kr.cloudflare import ENVIRONMENTS
from kr.commands import build, gaps, gate, gc, golden, keys, publish, query, rollback, serve
from kr.commands import eval as evaluate
from kr.golden import DEFAULT_GOLDEN
from kr.help_center import EXTRA_SETS_VARIABLE
from kr.local import DEFAULT_EMBEDDER
from kr.rerankers import DEFAULT_RERANKER, RERANKER_HELP
from router.adapters.local.embedders import EMBEDDER_CHOICES, embedder_choice
from router.errors import ConfigError, KnowledgeFormatError, QualityGateError, RouterError

__all__ = [
    "ERROR_EXIT",
    "FORMAT_ERROR_EXIT",
    "GATE_BLOCKED_EXIT",
    "INTERRUPTED_EXIT",
    "main",
]

ERROR_EXIT = 1
"""Exit status of a command that failed (a router error or an OS error)."""
FORMAT_ERROR_EXIT = 2
"""Exit status of a knowledge format error (``kr build --strict`` on a malformed file)."""
GATE_BLOCKED_EXIT = 3
"""Exit status of a command the quality gate stopped."""
INTERRUPTED_EXIT = 130
"""Exit status after Ctrl-C (128 + SIGINT, as shells report it)."""

Command = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]
COMMANDS: dict[str, Command] = {
    "build": build.run,
    "query": query.run,
    "eval": evaluate.run,
    "publish": publish.run,
    "gate": gate.run,
    "rollback": rollback.run,
    "gc": gc.run,
    "keys": keys.run,
    "gaps": gaps.run,
    "golden": golden.run,
}
"""The async commands; ``kr serve`` runs its own event loop (uvicorn's)."""


Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kr", description="Knowledge Router (local default)")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (
        _build,
        _query,
        _serve,
        _publish,
        _eval,
        _gate,
        _rollback,
        _gc,
        _keys,
        _gaps,
        _golden,
    ):
        add(sub)
    return parser


def _state_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state", type=Path, default=None, help="state folder ($KR_STATE)")


def _gate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--golden", type=Path, default=DEFAULT_GOLDEN, help="gate: golden set")
    p.add_argument(
        "--extra",
        type=Path,
        action="append",
        default=[],
        help="gate: also compare on this help-center or BEIR folder (repeatable; also the "
        f"folders of ${EXTRA_SETS_VARIABLE})",
    )
    p.add_argument("--split", default=DEFAULT_SPLIT, help="gate: qrels split of the extra sets")
    p.add_argument(
        "--tolerance",
        action="append",
        default=[],
        metavar="METRIC=MAX_DROP",
        help="gate: override a tolerance, e.g. hit@1=0.02 (repeatable)",
    )
    p.add_argument("--today", help="gate: ask the queries on this day (YYYY-MM-DD)")


def _reranker_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reranker", default=DEFAULT_RERANKER, metavar="SPEC", help=RERANKER_HELP)


def _force_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--force",
        action="store_true",
        help="activate without the quality gate (the forced activation is logged)",
    )


def _build(sub: Subparsers) -> None:
    p = sub.add_parser("build", help="compile a knowledge folder and activate it")
    p.add_argument("knowledge_dir", type=Path)
    _state_arg(p)
    p.add_argument("--strict", action="store_true", help="fail on any malformed file")
    p.add_argument("--out", type=Path, help="also write the package files here")
    p.add_argument("--no-activate", action="store_true", help="publish without activating")
    p.add_argument(
        "--embedder",
        type=_embedder_arg,
        default=DEFAULT_EMBEDDER,
        metavar="{e5,hash,none,workers-ai:MODEL}",
        help="section vectors for the vector fallback (default e5: multilingual-e5-small); "
        "workers-ai:@cf/baai/bge-m3 (or another Workers AI embedding model) makes them with "
        "the model the Worker embeds questions with, through the Cloudflare API "
        "($CLOUDFLARE_API_TOKEN, $CLOUDFLARE_ACCOUNT_ID)",
    )
    p.add_argument(
        "--doc2query",
        type=int,
        default=0,
        metavar="N",
        help="first ask an LLM for N questions per section, indexed with it (doc2query; an "
        "OpenAI-compatible endpoint: $KR_LLM_BASE_URL, $KR_LLM_MODEL, $KR_LLM_API_KEY)",
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="compile everything and parse every file again (default: the files changed "
        "since the last full build are compiled as delta partitions against it, when within "
        "the delta bound (docs/adr/0020); a full build reuses the parse of unchanged files, "
        "<state>/build/documents.sqlite)",
    )
    p.add_argument(
        "--watch",
        action="store_true",
        help="after the build, rebuild and activate (through the gate) after every save, "
        "until Ctrl-C; a failed build leaves the active version serving",
    )
    _force_arg(p)
    _gate_args(p)


def _embedder_arg(value: str) -> str:
    """``--embedder``'s check: a known name or ``workers-ai:<a known model>``."""
    try:
        return embedder_choice(value)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(exc.message) from exc


def _query(sub: Subparsers) -> None:
    p = sub.add_parser("query", help="ask the active knowledge version")
    p.add_argument("text")
    _state_arg(p)
    for name in ("tenant", "page", "tab", "focus"):
        p.add_argument(f"--{name}")
    p.add_argument("--date", type=dt.date.fromisoformat, help="YYYY-MM-DD")
    p.add_argument("--top-k", type=int, default=None, help="default: adaptive (3/8/15)")
    p.add_argument("--trace", action="store_true", help="print the stage trace")
    p.add_argument("--json", action="store_true", help="print the QueryResponse as JSON")
    _reranker_arg(p)


def _serve(sub: Subparsers) -> None:
    p = sub.add_parser("serve", help="serve the HTTP API")
    _state_arg(p)
    p.add_argument("--host", default=serve.DEFAULT_HOST)
    p.add_argument("--port", type=int, default=serve.DEFAULT_PORT)
    p.add_argument(
        "--no-anonymous",
        action="store_true",
        help="refuse requests without a credential (401); default: anonymous callers get "
        "shared knowledge only ($KR_ALLOW_ANONYMOUS)",
    )
    p.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser origin allowed to call the API (repeatable; '*' alone: any origin, "
        "without credentials); default none ($KR_CORS_ORIGINS). JWTs: $KR_JWT_HS256_SECRET or "
        "$KR_JWKS, $KR_JWT_TENANT_CLAIM, $KR_JWT_AUDIENCE, $KR_JWT_ISSUER",
    )
    p.add_argument(
        "--caller-ms-per-s",
        type=float,
        default=None,
        metavar="MS",
        help="serving time one caller (credential, else address) may use a second, sustained; "
        "over it its requests wait or get 429 (0: no limit; default 250, $KR_CALLER_MS_PER_S; "
        "burst $KR_CALLER_BURST_MS, default 1000)",
    )
    p.add_argument(
        "--eval-report",
        type=Path,
        default=serve.DEFAULT_EVAL_REPORT,
        metavar="FILE",
        help="the kr eval report the playground's golden-set view (/eval) shows; default "
        "%(default)s (served at /eval/report.json to the operator only: Bearer $KR_ADMIN_TOKEN; "
        "off without it)",
    )
    _reranker_arg(p)


def _publish(sub: Subparsers) -> None:
    p = sub.add_parser(
        "publish",
        help="send a built package to Cloudflare (R2, D1, Vectorize, then KV activation)",
        description="Publish a package: blobs to R2, rows to D1, vectors to Vectorize, then the "
        "KV switch, last. Resumable: finished steps are journaled in the state folder, so "
        "running the same command again continues where it stopped, and does nothing once done.",
    )
    p.add_argument(
        "package",
        nargs="?",
        help="package folder (with manifest.json, as written by `kr build --out`) or a "
        "version in the local state; default: the version `kr build` activated",
    )
    _state_arg(p)
    p.add_argument(
        "--local",
        action="store_true",
        help="write into wrangler's local state with `wrangler … --local` (no Vectorize)",
    )
    p.add_argument("--env", choices=ENVIRONMENTS, help="wrangler environment ([env.NAME])")
    p.add_argument("--no-activate", action="store_true", help="publish without activating")
    _force_arg(p)
    _gate_args(p)
    p.add_argument(
        "--api-base",
        help="Cloudflare API base URL ($CLOUDFLARE_API_BASE_URL; default: the real one)",
    )
    p.add_argument("--config", type=Path, help="wrangler.toml (default: ./wrangler.toml)")
    p.add_argument("--persist-to", type=Path, help="with --local: wrangler's state folder")
    p.add_argument("--account-id", help="Cloudflare account ($CLOUDFLARE_ACCOUNT_ID)")
    p.add_argument("--bucket", help="R2 bucket ($KR_R2_BUCKET)")
    p.add_argument("--kv-namespace-id", help="KV namespace id ($KR_KV_NAMESPACE_ID)")
    p.add_argument("--d1-database-id", help="D1 database id ($KR_D1_DATABASE_ID)")
    p.add_argument("--vectorize-index", help="Vectorize index name ($KR_VECTORIZE_INDEX)")


def _eval(sub: Subparsers) -> None:
    p = sub.add_parser(
        "eval",
        help="evaluate golden, help-center or BEIR sets; writes reports/<set>/",
        description="Golden set (JSONL) against the active version (or --package), a "
        "help-center folder (knowledge/ + golden.jsonl) or a BEIR-layout folder, both compiled "
        "in memory: ranx metrics, abstention, false answers, calibration (ECE), per category "
        "and path, stage latency. Several sets are printed side by side. Writes metrics.json, "
        "report.md and plots under reports/<set>/ for each set.",
    )
    p.add_argument(
        "targets",
        nargs="*",
        type=Path,
        metavar="SET",
        help=f"golden set .jsonl, help-center folder or BEIR folder (default {DEFAULT_GOLDEN} "
        f"and the folders of ${EXTRA_SETS_VARIABLE})",
    )
    _state_arg(p)
    p.add_argument("--package", type=Path, help="golden: evaluate this package folder")
    p.add_argument(
        "--split", default=DEFAULT_SPLIT, help=f"BEIR: qrels split (default {DEFAULT_SPLIT})"
    )
    p.add_argument(
        "--embedder",
        choices=EMBEDDER_CHOICES,
        default=DEFAULT_EMBEDDER,
        help="folders: section vectors (default e5, from the vector cache; a BEIR run falls "
        "back to none with a note when they are not cached, a help-center set embeds them)",
    )
    p.add_argument(
        "--embed-missing",
        action="store_true",
        help="BEIR: embed vectors missing from the cache, however long it takes",
    )
    p.add_argument(
        "--variant",
        choices=VARIANTS,
        default=DEFAULT_VARIANT,
        help="BEIR: cascade (default), BM25 only, vectors only, or always hybrid (RRF)",
    )
    p.add_argument("--language", choices=LANGUAGES, help="BEIR analyzer")
    p.add_argument("--today", help="golden: ask the queries on this day (YYYY-MM-DD)")
    p.add_argument(
        "--report-dir", type=Path, help="default: reports/<set> (several sets: DIR/<set>)"
    )
    p.add_argument("--no-report", action="store_true", help="write no report files")
    p.add_argument("--json", action="store_true", help="print metrics as JSON")
    p.add_argument("--failures", action="store_true", help="list the missed queries")
    _reranker_arg(p)


def _gate(sub: Subparsers) -> None:
    p = sub.add_parser(
        "gate",
        help=f"compare a built package with the active version (exit {GATE_BLOCKED_EXIT} if worse)",
        description="Evaluate CANDIDATE (a folder from `kr build --out`, or a version in the "
        "state) and the active version on the golden set and any --extra help-center or BEIR "
        "folder (recompiled with each version's build configuration); a "
        f"metric worse than its tolerance blocks (exit status {GATE_BLOCKED_EXIT}) with the "
        "list of queries that got worse.",
    )
    p.add_argument("candidate", help="package folder or knowledge version")
    _state_arg(p)
    _gate_args(p)
    p.add_argument("--activate", action="store_true", help="activate the candidate if it passes")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")


def _rollback(sub: Subparsers) -> None:
    p = sub.add_parser("rollback", help="activate the previous knowledge version")
    _state_arg(p)
    p.add_argument(
        "--env", choices=ENVIRONMENTS, help="roll back on Cloudflare (wrangler [env.NAME])"
    )
    p.add_argument("--api-base", help="Cloudflare API base URL (implies a remote rollback)")
    p.add_argument("--config", type=Path, help="wrangler.toml (default: ./wrangler.toml)")


def _gc(sub: Subparsers) -> None:
    p = sub.add_parser(
        "gc",
        help="delete old versions and the shared files no kept version references",
        description="Keep the active version, the previous one (the rollback target) and the "
        "N most recently published others; delete the rest: their files, their D1 rows (and "
        "Vectorize records on Cloudflare), and the shared content-named files no kept version "
        "names. Do not run it while a publish to the same place is under way.",
    )
    p.add_argument(
        "--keep",
        type=int,
        required=True,
        metavar="N",
        help="versions kept besides the active and previous ones",
    )
    p.add_argument("--dry-run", action="store_true", help="print what would go, delete nothing")
    p.add_argument(
        "--log-retention-days",
        type=float,
        metavar="DAYS",
        help="local state: also delete logged queries and questions older than this "
        "(default $KR_LOG_RETENTION_DAYS, else 30; the Worker's cron does it on D1)",
    )
    _state_arg(p)
    p.add_argument(
        "--env", choices=ENVIRONMENTS, help="collect on Cloudflare (wrangler [env.NAME])"
    )
    p.add_argument("--api-base", help="Cloudflare API base URL (implies Cloudflare)")
    p.add_argument("--config", type=Path, help="wrangler.toml (default: ./wrangler.toml)")


def _keys(sub: Subparsers) -> None:
    p = sub.add_parser("keys", help="manage the API keys that decide a request's tenant")
    actions = p.add_subparsers(dest="keys_command", required=True)
    create = actions.add_parser("create", help="print a new key (once) for a tenant")
    create.add_argument("--tenant", required=True)
    create.add_argument(
        "--sql",
        type=Path,
        metavar="FILE",
        help="also write the key's D1 row as an INSERT, for the Worker's database: "
        "npx wrangler d1 execute KNOWLEDGE_DB --env production --remote --file FILE",
    )
    _state_arg(create)
    listing = actions.add_parser("list", help="key ids, tenants, dates (never the keys)")
    _state_arg(listing)
    revoke = actions.add_parser("revoke", help="stop a key from working")
    revoke.add_argument("key_id")
    _state_arg(revoke)


def _period_args(p: argparse.ArgumentParser) -> None:
    when = "YYYY-MM-DD, an ISO timestamp, unix seconds, or a span before now: 7d, 24h"
    p.add_argument("--since", help=f"from ({when}; default: a week before --until)")
    p.add_argument("--until", help=f"to, excluded ({when}; default: now)")
    p.add_argument("--tenant", help="one tenant's questions only (default: every tenant's)")


def _gaps(sub: Subparsers) -> None:
    p = sub.add_parser(
        "gaps",
        help="the questions the knowledge did not answer, grouped by topic",
        description="Questions of the local question log that were declined, answered with "
        "LOW confidence, or asked again in other words right after their answer, grouped by "
        "shared analysed terms: count, first/last seen, an example, the router's reason and "
        "the nearest sections with their scores (docs/adr/0025). kr serve logs the questions; "
        "GET /v1/gaps and the playground's /gaps show the same report.",
    )
    _state_arg(p)
    _period_args(p)
    p.add_argument("--limit", type=int, default=20, help="groups shown (default 20)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def _golden(sub: Subparsers) -> None:
    p = sub.add_parser("golden", help="grow the golden set from logged questions")
    actions = p.add_subparsers(dest="golden_command", required=True)
    add = actions.add_parser(
        "add",
        help="promote a logged question, or a gap group's questions, into the golden set",
        description="Adds the question (its tenant, page, tab, focus and date as logged) to "
        "the golden set with the document(s) that answer it, or abstain: true; a question "
        "already there is refused. The quality gate then holds every later version to it.",
    )
    which = add.add_mutually_exclusive_group(required=True)
    which.add_argument("--question", type=int, metavar="ID", help="a logged question's id")
    which.add_argument("--gap", metavar="GROUP", help="every wording of a kr gaps group")
    add.add_argument(
        "--expect",
        action="append",
        default=[],
        metavar="ID",
        help="a document or section id that answers it (repeatable)",
    )
    add.add_argument("--abstain", action="store_true", help="the right answer is to decline")
    add.add_argument("--golden", type=Path, default=DEFAULT_GOLDEN, help="the golden set")
    add.add_argument("--category", default=golden.DEFAULT_CATEGORY, help="its category")
    add.add_argument("--query", help="the wording to store (when only terms were logged)")
    add.add_argument(
        "--no-check", action="store_true", help="do not check the ids against the active version"
    )
    _state_arg(add)
    _period_args(add)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "serve":
            return serve.run(args)
        return asyncio.run(COMMANDS[args.command](args))
    except QualityGateError as exc:
        print(exc.details)
        print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
        return GATE_BLOCKED_EXIT
    except KnowledgeFormatError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return FORMAT_ERROR_EXIT
    except RouterError as exc:
        print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
        return ERROR_EXIT
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ERROR_EXIT
    except KeyboardInterrupt:
        if args.command == "publish":
            print("interrupted: run the same command again to resume", file=sys.stderr)
        return INTERRUPTED_EXIT


if __name__ == "__main__":
    sys.exit(main())
