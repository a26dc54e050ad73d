"""Stage — exact keys: which ids a question names, found in one pass whatever its length."""

from __future__ import annotations

from router.stages.exact import query_keys
from router.stages.normalizer import normalize_query


def test_ids_are_found_where_a_word_starts_and_a_long_token_reads_once() -> None:
    text = "veja apr.validity e (workPermit#components), não 9x.y nem https://a.b"
    keys = query_keys(normalize_query(text))
    assert {"apr.validity", "workpermit#components"} <= set(keys)
    assert "x.y" not in keys  # inside a token, not an id of its own
    long_token = normalize_query("a" * 5000 + " apr.validity")
    assert "apr.validity" in query_keys(long_token)
