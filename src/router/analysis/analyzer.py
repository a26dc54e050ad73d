"""The text analyzer: one function from text to index terms, used by the compiler and the runtime.

Why it is built like this:
- codes such as ``NR-35``, ``ORA-00942`` or ``workPermit.validity`` are kept whole (and compact,
  ``nr35``) *and* split into their parts, so both the exact code and its words match;
- words are stemmed with Snowball on their accented form (the stemmer's rules need the accents),
  then accent-folded; a query typed without accents (``permissao``) is mapped back to the stem of
  the accented word seen in the corpus through the *accent lexicon* shipped with the package;
- Portuguese ``-ões``/``-ães`` plurals are brought to ``-ão`` first (Snowball leaves them apart).
The stemmer is PyStemmer (C) wherever it imports — the build, and CPython's queries — and
snowballstemmer (pure Python) in the Worker (``stem_function``). Both are generated from the same
Snowball sources and give the same stem for every word: the compiler checks it on every build's
vocabulary, and tests/analysis/test_stemmers.py on the golden and BEIR vocabularies.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from router.analysis.stopwords import STOPWORDS
from router.analysis.text import fold, has_diacritics, normalize_text, split_camel
from router.checks import check_choice, check_count
from router.errors import ConfigError

__all__ = [
    "ISOLATE_STEM_WORDS",
    "MAX_QUERY_WORD_CHARS",
    "Analyzer",
    "AnalyzerConfig",
    "BoundedTerms",
    "StemFunction",
    "snowball_stem_function",
    "stem_function",
]

StemFunction = Callable[[str], str]

# A span of letters/digits possibly joined by connectors: "NR-35", "workPermit.validity", "apr".
_SPAN = re.compile(r"[^\W_]+(?:[-./_][^\W_]+)*")
_CONNECTOR = re.compile(r"[-./_]")
_PLURAL_AO = re.compile(r"(?:ões|ães)$")
_DEFAULT_MIN_WORD_LENGTH = 2

MAX_QUERY_WORD_CHARS = 64
"""A question's word (or whole code) longer than this is left out of its terms: no word of the
languages served is that long (Portuguese's longest has 29 letters), a code that long is an id
the exact stage resolves whole, and a 2,000-letter token would otherwise be stemmed, folded and
looked up as one term. Documents are analysed whole (``terms``): the bound is the query's."""


@dataclass(frozen=True)
class BoundedTerms:
    """The terms of a question's first words (``Analyzer.bounded_terms``)."""

    terms: list[str]
    words: list[str]  # the plain words stemmed, lower-cased, in order (what typo repair reads)
    truncated: bool  # words were left out: past the bound, or longer than MAX_QUERY_WORD_CHARS


class _WordBudget:
    """Words a bounded analysis may still stem, and the words it stemmed."""

    __slots__ = ("left", "truncated", "words")

    def __init__(self, words: int) -> None:
        self.left = words
        self.truncated = False
        self.words: list[str] = []

    def admits(self, word: str) -> bool:
        """Whether ``word`` is analysed (it is counted either way: a bound on the scan too)."""
        if self.left <= 0:
            self.truncated = True
            return False
        self.left -= 1
        if len(word) > MAX_QUERY_WORD_CHARS:
            self.truncated = True
            return False
        self.words.append(word.casefold())
        return True


@dataclass(frozen=True)
class AnalyzerConfig:
    """Everything that changes which terms a text produces; saved in the package manifest."""

    language: str = "portuguese"
    min_word_length: int = _DEFAULT_MIN_WORD_LENGTH
    keep_codes: bool = True
    fold_plurals: bool = True

    def __post_init__(self) -> None:
        check_choice("AnalyzerConfig", "language", self.language, sorted(STOPWORDS))
        check_count("AnalyzerConfig", "min_word_length", self.min_word_length)

    def to_dict(self) -> dict[str, object]:
        return {
            "language": self.language,
            "min_word_length": self.min_word_length,
            "keep_codes": self.keep_codes,
            "fold_plurals": self.fold_plurals,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> AnalyzerConfig:
        try:
            return cls(
                language=str(data["language"]),
                min_word_length=int(str(data["min_word_length"])),
                keep_codes=bool(data["keep_codes"]),
                fold_plurals=bool(data["fold_plurals"]),
            )
        except (KeyError, ValueError) as exc:
            raise ConfigError(f"invalid analyzer config: {exc}") from exc


_SNOWBALL_ALONE = "router_snowball_stemmers"
"""A private package over snowballstemmer's folder, whose ``__init__`` is never run."""


def snowball_stem_function(language: str) -> StemFunction:
    """snowballstemmer's pure-Python stemmer of ``language`` (the Worker's, and the default of
    every analyzer), imported without the others: importing the ``snowballstemmer`` package
    compiles all 33 of its stemmers — 850 ms and 8 MiB of a Worker's heap at the first query,
    measured in Pyodide. The build injects PyStemmer (C) instead and checks that the two agree
    on every word of the vocabulary (``router.compile.indexer.check_stemmer_equality``)."""
    if not re.fullmatch(r"[a-z]+(?:_[a-z]+)*", language):
        raise ConfigError(f"no Snowball stemmer for language {language!r}")
    package = sys.modules.get(_SNOWBALL_ALONE)
    if package is None:
        spec = importlib.util.find_spec("snowballstemmer")  # finds it, runs nothing
        if spec is None or not spec.submodule_search_locations:
            raise ConfigError("snowballstemmer is not installed")
        package = types.ModuleType(_SNOWBALL_ALONE)
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules[_SNOWBALL_ALONE] = package
    try:
        module = importlib.import_module(f"{_SNOWBALL_ALONE}.{language}_stemmer")
    except ModuleNotFoundError as exc:
        raise ConfigError(f"no Snowball stemmer for language {language!r}") from exc
    name = "".join(part.capitalize() for part in language.split("_")) + "Stemmer"
    return getattr(module, name)().stemWord  # type: ignore[no-any-return]


ISOLATE_STEM_WORDS = 2048
"""Words whose pure-Python stems an isolate remembers per language, for all its analyzers (a
view's own cache maps a word to its term; this one outlives the view: a new tenant's, or the
next version's after a publish). Cold Snowball stemming costs ~70 µs a word in CPython."""

_isolate_stems: dict[str, StemFunction] = {}


class _RememberedStems:
    """A stem function that remembers up to ``entries`` words, forgetting all when full (a
    query's words are unbounded, and may be an attacker's)."""

    __slots__ = ("_entries", "_stem", "_stems")

    def __init__(self, stem: StemFunction, entries: int) -> None:
        self._stem, self._entries = stem, entries
        self._stems: dict[str, str] = {}

    def __call__(self, word: str) -> str:
        stem = self._stems.get(word)
        if stem is None:
            stem = self._stem(word)
            if len(self._stems) >= self._entries:
                self._stems.clear()
            self._stems[word] = stem
        return stem


def stem_function(language: str) -> StemFunction:
    """The stemmer of ``language`` every analyzer gets unless given one: PyStemmer's (C, ~20×
    faster) where it imports — CPython —, else snowballstemmer's (``snowball_stem_function``)
    behind the isolate's cache (``ISOLATE_STEM_WORDS``). Pyodide never tries PyStemmer: the
    Worker has no C extension."""
    stemmer = _pystemmer()
    if stemmer is None:
        remembered = _isolate_stems.get(language)
        if remembered is None:
            remembered = _RememberedStems(snowball_stem_function(language), ISOLATE_STEM_WORDS)
            _isolate_stems[language] = remembered
        return remembered
    try:
        return stemmer.Stemmer(language).stemWord  # type: ignore[no-any-return]
    except KeyError as exc:
        raise ConfigError(f"no Snowball stemmer for language {language!r}") from exc


_stemmer_module: types.ModuleType | None = None
_stemmer_tried = False


def _pystemmer() -> types.ModuleType | None:
    """PyStemmer's module, imported at the first call (the core imports without it)."""
    global _stemmer_module, _stemmer_tried
    if not _stemmer_tried:
        _stemmer_tried = True
        if sys.platform != "emscripten":
            try:
                import Stemmer
            except ImportError:
                Stemmer = None  # type: ignore[assignment]
            _stemmer_module = Stemmer
    return _stemmer_module


@dataclass
class Analyzer:
    """Turns text into index terms; identical output at build and at query time."""

    config: AnalyzerConfig = field(default_factory=AnalyzerConfig)
    stem: StemFunction | None = None
    accent_lexicon: Mapping[str, str] = field(default_factory=dict)
    stem_cache_entries: int = 0  # 0: unbounded (a build); a query analyzer bounds it
    # word as written → its term or None (``word_stem``): a word seen before costs one lookup
    _stem_cache: dict[str, str | None] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.config.language not in STOPWORDS:
            raise ConfigError(f"unsupported analyzer language {self.config.language!r}")
        if self.stem is None:
            self.stem = stem_function(self.config.language)
        self._stopwords = frozenset(fold(w) for w in STOPWORDS[self.config.language])
        self._portuguese = self.config.language == "portuguese"

    # -- public -------------------------------------------------------------------------------

    def terms(self, text: str) -> list[str]:
        """Index terms of a text, in order, duplicates kept (BM25 counts each occurrence)."""
        out: list[str] = []
        for match in _SPAN.finditer(normalize_text(text)):
            self._span_terms(match.group(), out)
        return out

    def bounded_terms(self, text: str, max_words: int) -> BoundedTerms:
        """``terms`` of the first ``max_words`` words of a question (each word counted once it is
        split from its code and its camelCase), words longer than ``MAX_QUERY_WORD_CHARS`` left
        out: a question's analysis costs at most ``max_words`` stems whatever it holds."""
        out: list[str] = []
        budget = _WordBudget(max_words)
        for match in _SPAN.finditer(normalize_text(text)):
            if budget.left <= 0:
                budget.truncated = True
                break
            self._span_terms(match.group(), out, budget)
        return BoundedTerms(out, budget.words, budget.truncated)

    def word_stem(self, word: str) -> str | None:
        """Stem of one plain word, or None when it is a stopword or too short."""
        cache = self._stem_cache
        if word in cache:
            return cache[word]
        stem = self._word_stem(word)
        if self.stem_cache_entries and len(cache) >= self.stem_cache_entries:
            cache.clear()  # queries' words are unbounded (and may be an attack's)
        cache[word] = stem
        return stem

    def surface_stem(self, lowered: str) -> str:
        """Accent-folded stem of a lower-case word, ignoring the lexicon (used to build it)."""
        if self._portuguese and self.config.fold_plurals:
            lowered = _PLURAL_AO.sub("ão", lowered)
        assert self.stem is not None
        return fold(self.stem(lowered))

    def vocabulary_words(self, texts: Iterable[str]) -> set[str]:
        """Lower-cased plain words of texts (what the stemmer will see), for equality checks."""
        words: set[str] = set()
        for text in texts:
            for match in _SPAN.finditer(normalize_text(text)):
                for piece in _CONNECTOR.split(match.group()):
                    for part in split_camel(piece):
                        words.add(part.casefold())
        return words

    # -- internals ----------------------------------------------------------------------------

    def _word_stem(self, word: str) -> str | None:
        lowered = word.casefold()
        folded = fold(lowered)
        if folded in self._stopwords:
            return None
        if len(folded) < self.config.min_word_length and not folded.isdigit():
            return None
        return self._stem_uncached(lowered, folded)

    def _stem_uncached(self, lowered: str, folded: str) -> str:
        if not has_diacritics(lowered):
            known = self.accent_lexicon.get(folded)
            if known is not None:
                return known
        return self.surface_stem(lowered)

    def _span_terms(self, span: str, out: list[str], budget: _WordBudget | None = None) -> None:
        if _CONNECTOR.search(span):
            if self.config.keep_codes and (budget is None or len(span) <= MAX_QUERY_WORD_CHARS):
                whole = fold(span)
                out.append(whole)
                compact = _CONNECTOR.sub("", whole)
                if compact != whole and any(ch.isdigit() for ch in compact):
                    out.append(compact)
            for piece in _CONNECTOR.split(span):
                self._word_terms(piece, out, budget)
            return
        self._word_terms(span, out, budget)

    def _word_terms(self, word: str, out: list[str], budget: _WordBudget | None = None) -> None:
        parts = split_camel(word)
        whole = budget is None or len(word) <= MAX_QUERY_WORD_CHARS
        if len(parts) > 1 and self.config.keep_codes and whole:
            out.append(fold(word))
        for part in parts:
            if budget is not None and not budget.admits(part):
                continue
            stem = self.word_stem(part)
            if stem is not None:
                out.append(stem)
