"""BM25 ranking over the compiled postings: one front door (``ranking.top_k``: the lexical stage's
``served_terms_top_k``, ``served_top_k`` over given lists), the exhaustive reference
(``ranking.bm25``), the pruned and threshold top-k (``ranking.pruning``, ``ranking.threshold``;
the pruned path's search, windows and bounds in ``ranking.maxscore``, ``ranking.windows``,
``ranking.score_bounds``), the result they all return (``ranking.result``) and the optional
numpy backend (``ranking.numpy_backend``, CPython only)."""
