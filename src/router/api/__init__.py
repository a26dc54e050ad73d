"""The HTTP API (one FastAPI app for ``kr serve`` and the Worker)."""
