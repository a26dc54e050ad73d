"""Tests of ``router.ranking``: the BM25 scorers agree with each other and with bm25s."""
