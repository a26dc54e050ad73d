"""The embedded local default: a folder for R2, SQLite for D1 (same migrations) and for KV."""

from router.adapters.local.state import LocalState

__all__ = ["LocalState"]
