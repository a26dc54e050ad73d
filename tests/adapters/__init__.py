"""Tests of ``router.adapters``: local, Worker-binding and REST adapters against one contract per
port; the Python fakes of the Cloudflare bindings are in ``cloudflare_fakes.py``."""
