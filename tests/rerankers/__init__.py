"""Tests of ``router.rerankers``: the rerankers that need no adapter of their own."""
