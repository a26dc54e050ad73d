"""The Portuguese sound key that typo repair matches misspellings with."""

from __future__ import annotations

import pytest

from router.analysis.sound import portuguese_sound_key


@pytest.mark.parametrize(
    ("typo", "word"),
    [
        ("calibrassão", "calibração"),
        ("aprovasao", "aprovação"),
        ("excessão", "exceção"),
        ("xave", "chave"),
        ("kebra", "quebra"),
        ("analizar", "analisar"),
        ("ospital", "hospital"),
        ("jente", "gente"),
    ],
)
def test_portuguese_misspellings_share_the_sound_key_of_the_word(typo: str, word: str) -> None:
    assert portuguese_sound_key(typo) == portuguese_sound_key(word)


@pytest.mark.parametrize(("a", "b"), [("faca", "vaca"), ("pato", "bato"), ("mata", "nata")])
def test_different_words_keep_different_sound_keys(a: str, b: str) -> None:
    assert portuguese_sound_key(a) != portuguese_sound_key(b)
