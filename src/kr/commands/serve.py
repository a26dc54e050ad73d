"""``kr serve``: the HTTP API over the local service (uvicorn, in this process)."""

from __future__ import annotations

import argparse

from kr.local import local_service

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "run"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787  # wrangler dev's port: the same URL reaches the Worker or the local API


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from router.api.app import create_app

    app = create_app(local_service(args.state))
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0
