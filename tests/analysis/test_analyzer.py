"""The shared analyzer: codes, accents, plurals, stemming parity between build and Worker."""

from __future__ import annotations

import subprocess
import sys
import unicodedata

import pytest

from router.analysis.analyzer import Analyzer, AnalyzerConfig, snowball_stem_function
from router.compile import indexer
from router.compile.build import BuildResult
from router.compile.indexer import check_stemmer_equality, section_index_text
from router.errors import ConfigError


@pytest.fixture(scope="module")
def analyzer() -> Analyzer:
    return Analyzer()


def test_codes_are_kept_whole_compact_and_split(analyzer: Analyzer) -> None:
    terms = analyzer.terms("Consulte a NR-35, o erro ORA-00942 e workPermit.validity")
    for term in ["nr-35", "nr35", "nr", "35", "ora-00942", "ora00942", "00942"]:
        assert term in terms
    assert "workpermit.validity" in terms and "workpermit" in terms and "permit" in terms


def test_query_spellings_of_a_code_meet(analyzer: Analyzer) -> None:
    indexed = set(analyzer.terms("Treinamento NR-35"))
    assert "nr35" in indexed and set(analyzer.terms("nr35")) <= indexed
    assert set(analyzer.terms("NR 35")) <= indexed


def test_stopwords_removed_and_accents_folded(analyzer: Analyzer) -> None:
    assert analyzer.terms("O que é a APR?") == ["apr"]
    assert analyzer.terms("Análise") == analyzer.terms("ANÁLISE")


def test_plural_forms_share_a_stem(analyzer: Analyzer) -> None:
    assert analyzer.terms("permissões") == analyzer.terms("permissão")
    assert analyzer.terms("APRs") == analyzer.terms("APR")


def test_accent_lexicon_maps_unaccented_queries_to_the_accented_stem() -> None:
    plain = Analyzer()
    assert plain.terms("informacao") != plain.terms("informação")
    with_lexicon = Analyzer(accent_lexicon={"informacao": plain.terms("informação")[0]})
    assert with_lexicon.terms("informacao") == plain.terms("informação")


def test_nfc_and_nfd_give_the_same_terms(analyzer: Analyzer) -> None:
    text = "Permissão de trabalho em espaço confinado"
    nfd = unicodedata.normalize("NFD", text)
    assert nfd != text
    assert analyzer.terms(nfd) == analyzer.terms(text)


def test_build_and_runtime_stemmers_agree_on_the_sample_vocabulary(built: BuildResult) -> None:
    texts = [
        section_index_text(doc, section, i == 0)
        for doc in built.corpus.documents
        for i, section in enumerate(doc.sections)
    ]
    words = Analyzer().vocabulary_words(texts)
    assert len(words) > 1000
    check_stemmer_equality(words, AnalyzerConfig())  # raises on any difference


def test_the_build_check_compares_with_the_workers_own_stemmer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check runs the pure-Python stemmer the Worker runs (not PyStemmer twice): a runtime
    stemmer that differs on one word fails the build."""
    monkeypatch.setattr(indexer, "snowball_stem_function", lambda language: lambda word: word[:3])
    with pytest.raises(ConfigError, match="differ"):
        check_stemmer_equality(["trabalhadores", "permissões"], AnalyzerConfig())


def test_the_worker_imports_one_language_stemmer_not_all_of_them() -> None:
    """Without PyStemmer (as in the Worker), only the asked language's module is imported:
    snowballstemmer's package import compiles all 33 (850 ms and 8 MiB of heap in Pyodide)."""
    probe = (
        "import sys\n"
        "from router.analysis.analyzer import snowball_stem_function\n"
        "stem = snowball_stem_function('portuguese')\n"
        "assert stem('trabalhadores') == 'trabalh', stem('trabalhadores')\n"
        "loaded = sorted(m for m in sys.modules if 'stemmer' in m)\n"
        "print(loaded)\n"
        "assert 'snowballstemmer' not in sys.modules, loaded\n"
        "assert not any('english' in m for m in loaded), loaded\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    with pytest.raises(ConfigError):
        snowball_stem_function("klingon")


def test_unknown_language_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        Analyzer(AnalyzerConfig(language="klingon"))


def test_a_query_analyzer_remembers_a_bounded_number_of_stems() -> None:
    bounded = Analyzer(AnalyzerConfig(), stem_cache_entries=50)
    unbounded = Analyzer(AnalyzerConfig())
    words = [f"palavra{n}x inspeções" for n in range(400)]  # an attacker's endless new words
    assert [bounded.terms(w) for w in words] == [unbounded.terms(w) for w in words]
    assert len(bounded._stem_cache) <= 50 < len(unbounded._stem_cache)
