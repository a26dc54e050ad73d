"""Adapters: implementations of the ports (local embedded default; Cloudflare bindings)."""
