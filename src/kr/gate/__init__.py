"""The regression gate: a candidate package goes live only if it is not worse than the active one.

Both packages answer the same queries with the same configuration, latency budget lifted (see
``kr.answering``), so the verdict depends on the packages alone. The modules, in the order a
gate runs: ``runs`` (evaluate both packages on each set), ``compare`` (tolerances and the
per-query diff), ``report`` (the verdict as a table and as JSON), ``decision`` (may the
candidate be activated). Activating it is ``kr.activation``'s.
"""

__all__: list[str] = []
