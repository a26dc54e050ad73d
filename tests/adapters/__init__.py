"""Tests of ``router.adapters``: local and Cloudflare adapters against one contract per port."""
