"""Activation: the single KV write that makes a knowledge version the one every query reads.

Why one write: artifacts, rows and vectors are all scoped by version, so nothing a query reads
changes until ``knowledge:active-version`` does; the previous version is written first, so a
rollback always has somewhere to go and a crash between the two writes leaves the old version.
"""

from __future__ import annotations

from router.ports import ACTIVE_VERSION_KEY, PREVIOUS_VERSION_KEY, KeyValueStore

__all__ = ["activate"]


async def activate(kv: KeyValueStore, version: str) -> str | None:
    """Make ``version`` the one every new query reads; remember the previous one.

    Returns the version that was active before (None if none or the same). The write of
    :data:`ACTIVE_VERSION_KEY` is the switch; the previous version is written first, so a crash
    between the two writes leaves the old version active and the next run completes it.
    """
    previous = await kv.get(ACTIVE_VERSION_KEY)
    if previous and previous != version:
        await kv.put(PREVIOUS_VERSION_KEY, previous)
    await kv.put(ACTIVE_VERSION_KEY, version)
    return previous if previous and previous != version else None
