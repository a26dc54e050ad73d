"""``kr keys create|list|revoke``: the API keys of the local state folder (D1's ``api_keys``).

Why the key is printed alone: ``KEY=$(kr keys create --tenant T)`` is the way to take it, and
it is shown only this once (only its hash is stored); everything else goes to stderr.
"""

from __future__ import annotations

import argparse
import sys

from kr.local import local_keys
from router.auth.api_keys import check_tenant
from router.errors import InvalidRequestError

__all__ = ["run"]


async def run(args: argparse.Namespace) -> int:
    keys = local_keys(args.state)
    if args.keys_command == "create":
        plaintext, record = keys.create(check_tenant(args.tenant))
        print(plaintext)
        print(
            f"key {record.key_id} for tenant {record.tenant} created; it is not shown again",
            file=sys.stderr,
        )
        return 0
    if args.keys_command == "revoke":
        if not keys.revoke(args.key_id):
            raise InvalidRequestError(f"no working key with id {args.key_id!r}")
        print(f"key {args.key_id} revoked", file=sys.stderr)
        return 0
    for key in keys.list():
        state = f"revoked {key.revoked_at}" if key.revoked else "active"
        print(f"{key.key_id}\t{key.tenant}\t{key.created_at}\t{state}")
    return 0
