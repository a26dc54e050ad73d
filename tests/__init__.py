"""The test suite; its folders mirror the packages of ``src/``.

- top level: the router end to end — ``test_query.py`` (what a user depends on),
  ``test_publish.py`` (local publishing and activation), ``test_golden_eval.py`` (quality floors)
- ``cascade/``: the async cascade end to end, a file per concern (cache, vectors, graph,
  ranking, budget, trust and validity, context package, LLM answer, corrective, metrics)
- ``stages/``: each stage of ``router.stages`` on its own (cache, fusion, confidence, answer…),
  on a ``QueryState`` built as the pipeline builds it (``stages/state.py``)
- ``analysis/``, ``knowledge/``, ``compile/``, ``package/``, ``api/``: those packages of ``router``
- ``adapters/``: local, Worker-binding and REST adapters against one contract per port, with the
  Python fakes of the Cloudflare bindings (``cloudflare_fakes.py``)
- ``comparison/``: the BM25 scorers against bm25s and against the BM25F formula
- ``kr/``: the ``kr`` CLI (build, query, eval, gate, rollback)
- ``pyodide/``: the real Worker in Pyodide under Node (harness, fakes, parity) and wrangler checks

Constants and helpers: ``common.py``; fixtures: ``conftest.py``.
"""
