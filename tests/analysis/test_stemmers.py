"""PyStemmer (CPython's analyzers) and snowballstemmer (the Worker's) give the same stems; an
analyzer without PyStemmer falls back to the pure one, behind the isolate's bounded cache.

Why on whole vocabularies: the two libraries are generated from the same Snowball sources
(PyStemmer 3.1.0 and snowballstemmer 3.1.1 here), and a release of one without the other would
change the stems of some words — the served ids of CPython and of the Worker would part."""

from __future__ import annotations

import pytest
import Stemmer

from router.analysis import analyzer as analyzer_module
from router.analysis.analyzer import (
    ISOLATE_STEM_WORDS,
    Analyzer,
    AnalyzerConfig,
    snowball_stem_function,
    stem_function,
)
from tests.analysis.vocabularies import VOCABULARIES, texts_of


@pytest.mark.parametrize("name", VOCABULARIES)
def test_pystemmer_and_snowballstemmer_agree_on_every_word(
    name: str, vocabulary_texts: dict[str, list[str]]
) -> None:
    language = VOCABULARIES[name]
    words = Analyzer(AnalyzerConfig(language)).vocabulary_words(texts_of(vocabulary_texts, name))
    assert len(words) > 2000
    fast, pure = Stemmer.Stemmer(language).stemWord, snowball_stem_function(language)
    differing = sorted(word for word in words if fast(word) != pure(word))
    assert differing == []


@pytest.mark.parametrize("name", VOCABULARIES)
def test_the_terms_do_not_depend_on_the_stemmer(
    name: str, vocabulary_texts: dict[str, list[str]]
) -> None:
    """CPython's analyzer (PyStemmer, the default here) and the Worker's give the same terms."""
    config = AnalyzerConfig(VOCABULARIES[name])
    served = Analyzer(config, stem_cache_entries=512)
    worker = Analyzer(config, stem=snowball_stem_function(config.language))
    for text in texts_of(vocabulary_texts, name)[-1500:]:  # the questions, and documents
        assert served.terms(text) == worker.terms(text), text
        assert served.bounded_terms(text, 32) == worker.bounded_terms(text, 32), text


def test_cpython_analyzes_with_pystemmer() -> None:
    stem = Analyzer().stem
    assert type(getattr(stem, "__self__", None)).__module__ == "Stemmer"


def test_without_pystemmer_the_analyzer_stems_in_pure_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As in the Worker: snowballstemmer, one remembering stem function per language for every
    analyzer of the isolate, with the same terms."""
    monkeypatch.setattr(analyzer_module, "_pystemmer", lambda: None)
    monkeypatch.setattr(analyzer_module, "_isolate_stems", {})
    pure, other = Analyzer(), Analyzer()
    assert pure.stem is other.stem is stem_function("portuguese")
    assert stem_function("english") is not pure.stem
    text = "Permissões de trabalho vencidas: renovação da APR e NR-35 (workPermit.validity)"
    assert pure.terms(text) == Analyzer(stem=Stemmer.Stemmer("portuguese").stemWord).terms(text)


def test_the_isolate_remembers_a_bounded_number_of_pure_stems(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(analyzer_module, "_pystemmer", lambda: None)
    monkeypatch.setattr(analyzer_module, "_isolate_stems", {})
    stem = stem_function("portuguese")
    plain = snowball_stem_function("portuguese")
    words = [f"inspeções{n}x" for n in range(ISOLATE_STEM_WORDS + 500)]
    assert [stem(w) for w in words] == [plain(w) for w in words]
    assert len(stem._stems) <= ISOLATE_STEM_WORDS  # type: ignore[attr-defined]
