"""Tests of ``router.pipeline``: the async cascade end to end (cache, vectors, graph,
ranking, budget, trust, context package, LLM answer, corrective expansion, metrics)."""
