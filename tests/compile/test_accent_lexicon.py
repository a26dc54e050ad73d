"""The stored accent lexicon holds only the entries that change a stem, and every view's query
analyzer still stems every accent-free spelling exactly as the build analysed the documents."""

from __future__ import annotations

from router.analysis.analyzer import Analyzer, AnalyzerConfig, snowball_stem_function
from router.analysis.text import fold, has_diacritics
from router.compile.build import BuildResult
from router.compile.indexer import build_accent_lexicon, section_index_text, stored_lexicon
from router.knowledge.model import ALL_TENANTS
from router.package.reader import load_package
from tests.common import ALFA, BETA


def test_every_view_stems_accent_free_words_as_the_build_did(built: BuildResult) -> None:
    config = AnalyzerConfig()
    stem = snowball_stem_function(config.language)
    documents = built.corpus.documents

    def full_lexicon(tenant: str) -> dict[str, str]:
        texts = [
            section_index_text(doc, section, index == 0)
            for doc in documents
            if doc.tenant == tenant
            for index, section in enumerate(doc.sections)
        ]
        return build_accent_lexicon(texts, config, stem)

    shared = full_lexicon(ALL_TENANTS)
    files = built.package.files()
    package = load_package(files["manifest.json"], files.__getitem__)
    plain = Analyzer(config, stem=stem)
    for tenant in (None, ALFA, BETA):
        own = full_lexicon(tenant) if tenant else {}
        build = Analyzer(config, stem=stem, accent_lexicon={**own, **shared})
        query = package.view(tenant).analyzer
        words = {
            fold(w)
            for w in build.vocabulary_words(
                section_index_text(d, s, i == 0)
                for d in documents
                for i, s in enumerate(d.sections)
            )
            if has_diacritics(w)
        }
        assert len(words) > 50
        assert all(query.word_stem(word) == build.word_stem(word) for word in words), tenant
        assert len(stored_lexicon(own or shared, shared if own else {}, plain)) < len(own or shared)
