"""``kr serve``: the HTTP API over the local service (uvicorn, in this process), and the
playground at ``/`` (``router.api.pages``) with the last golden-set report at ``/eval`` (to the
operator only: ``KR_ADMIN_TOKEN``, read with the other ``KR_*`` credentials) and the content
gaps at ``/gaps``. Every served question is logged in the state (``$KR_LOG_STORE``,
``$KR_LOG_RETENTION_DAYS``: docs/security.md)."""

from __future__ import annotations

import argparse
import dataclasses
import os

from kr.commands.options import reranker
from kr.local import local_authenticator, local_service
from kr.report import DEFAULT_REPORTS_DIR
from router.api.cors import cors_policy_from
from router.api.fair_share import CallerShares, share_config_from
from router.api.pages import PLAYGROUND_DIR

__all__ = ["DEFAULT_EVAL_REPORT", "DEFAULT_HOST", "DEFAULT_PORT", "local_shares", "run"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787  # wrangler dev's port: the same URL reaches the Worker or the local API
DEFAULT_EVAL_REPORT = DEFAULT_REPORTS_DIR / "golden" / "metrics.json"  # what `kr eval` writes


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from router.api.app import create_app

    origins = ",".join(args.cors_origin) if args.cors_origin else os.environ.get("KR_CORS_ORIGINS")
    app = create_app(
        local_service(args.state, reranker=reranker(args), record=True),
        cors=cors_policy_from(origins),
        auth=local_authenticator(args.state, allow_anonymous=False if args.no_anonymous else None),
        shares=local_shares(args.caller_ms_per_s),
        pages=PLAYGROUND_DIR,
        eval_report=args.eval_report,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0


def local_shares(ms_per_s: float | None = None) -> CallerShares:
    """Each caller's share of ``kr serve``'s time: the flag, else ``$KR_CALLER_MS_PER_S``, else
    the default (an anonymous caller is its connection's peer address)."""
    config = share_config_from(os.environ.get)
    if ms_per_s is not None:
        config = dataclasses.replace(config, ms_per_s=ms_per_s)
    return CallerShares(config)
