"""Compiled word maps (accent lexicon, typo vocabulary): found in place, as the dicts were."""

from __future__ import annotations

import random

import pytest

from router.errors import PackageFormatError
from router.package.format.string_map import FirstOf, decode_string_map, encode_string_map

ALPHABET = "abcçãéz09 -\u00e9\u0301\U0001f600"


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(0, 9)))


@pytest.mark.parametrize("seed", range(20))
def test_a_compiled_map_answers_as_the_dict_it_was_built_from(seed: int) -> None:
    rng = random.Random(seed)
    entries = {_word(rng): _word(rng) for _ in range(rng.randrange(0, 80))}
    probes = [_word(rng) for _ in range(40)]
    found = decode_string_map(encode_string_map(entries), "test.bin")
    assert len(found) == len(entries) and dict(found) == entries
    for key in [*entries, *probes]:
        assert found.get(key) == entries.get(key) and (key in found) == (key in entries)


def test_values_of_splits_a_multi_valued_entry_and_first_of_prefers_the_first_map() -> None:
    shared = decode_string_map(encode_string_map({"acao": "açã", "sao": "a\x1fb"}), "a")
    own = decode_string_map(encode_string_map({"acao": "other", "peca": "peç"}), "b")
    assert shared.values_of("sao") == ("a", "b") and shared.values_of("nope") == ()
    merged = FirstOf(shared, own)
    assert merged["acao"] == "açã" and merged["peca"] == "peç" and "x" not in merged
    assert sorted(merged) == ["acao", "peca", "sao"] and len(merged) == 3


def test_a_malformed_map_is_refused() -> None:
    blob = encode_string_map({"a": "b", "c": "d"})
    for broken in (blob[:6], b"KRSMAP99" + blob[8:], blob + b"x", blob[:-1]):
        with pytest.raises(PackageFormatError):
            decode_string_map(broken, "test.bin")
