"""A streamed build (documents on disk, files staged as they are made, postings collected one
section at a time) makes the package an in-memory build makes, byte for byte, while holding
only a few documents at once."""

from __future__ import annotations

import random
import weakref
from array import array
from pathlib import Path

import pytest

from router.compile import corpus as corpus_module
from router.compile.build import build_knowledge, write_package
from router.compile.fields import SectionPostings, bm25f_block
from router.compile.indexer import BM25Params, compile_documents
from router.compile.spill import SpilledDocuments
from router.compile.staging import StagedFiles
from router.knowledge.model import Document
from router.package.format.fields import DEFAULT_FIELD_WEIGHTS, FIELD_NAMES
from tests.common import KNOWLEDGE


def test_a_streamed_build_writes_the_same_package(tmp_path: Path) -> None:
    in_memory = build_knowledge(KNOWLEDGE).package
    streamed = build_knowledge(KNOWLEDGE, spill=True, store=StagedFiles(tmp_path / "staged"))
    assert isinstance(streamed.corpus.documents, SpilledDocuments)
    package = streamed.package
    assert package.knowledge_version == in_memory.knowledge_version
    expected = in_memory.files()
    found = package.files()
    assert sorted(found) == sorted(expected)
    assert all(found[name] == blob for name, blob in expected.items())
    written = write_package(package, tmp_path / "out")
    assert {p.name: p.read_bytes() for p in written.iterdir()} == dict(expected)


class _Watched(SpilledDocuments):
    """Spilled documents that count how many of those read back are alive at once."""

    alive = 0
    most = 0

    def _read(self, start: int, end: int) -> Document:
        doc = super()._read(start, end)
        cls = type(self)
        cls.alive += 1
        cls.most = max(cls.most, cls.alive)
        weakref.finalize(doc, _Watched._gone)
        return doc

    @staticmethod
    def _gone() -> None:
        _Watched.alive -= 1


def test_a_streamed_build_holds_a_few_documents_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(corpus_module, "SpilledDocuments", _Watched)
    loaded = corpus_module.load_knowledge(KNOWLEDGE, spill=True)
    documents = loaded.documents
    assert isinstance(documents, _Watched) and len(documents) > 50
    _Watched.most = _Watched.alive = 0
    compile_documents(documents, synonyms=loaded.synonyms, store=StagedFiles(tmp_path))
    # a pass holds the document it reads; nested readers (a section's fields and its body)
    # one each — never a partition's documents
    assert 1 <= _Watched.most <= 3


def test_spilled_documents_read_back_equal_and_select_in_order(tmp_path: Path) -> None:
    docs = [Document(f"d{i}", f"Título {i}", f"d{i}.md", keywords=[str(i)]) for i in range(5)]
    spilled = SpilledDocuments()
    for doc in docs:
        spilled.append(doc)
    assert list(spilled) == docs and spilled[-1] == docs[-1] and len(spilled) == 5
    assert list(spilled.select([3, 0])) == [docs[3], docs[0]]
    assert list(spilled[1:3]) == docs[1:3]


def test_section_postings_are_bm25f_blocks_to_the_bit() -> None:
    chance = random.Random(7)
    words = [f"w{i}" for i in range(40)]
    weights = {**DEFAULT_FIELD_WEIGHTS, "wikilinks": 0.0}  # a field of weight 0: terms, no tf
    sections = [
        {name: chance.choices(words, k=chance.randrange(0, 9)) for name in FIELD_NAMES}
        for _ in range(60)
    ]
    params = BM25Params(method="atire")
    collected = SectionPostings(weights)
    collected.add_all(sections)
    terms = collected.sorted_terms()
    assert terms == sorted({t for s in sections for ts in s.values() for t in ts})
    assert collected.ids == {term: i for i, term in enumerate(terms)}
    field_tokens = {name: [s[name] for s in sections] for name in FIELD_NAMES}
    indptr, ids, impacts = bm25f_block(field_tokens, weights, collected.ids, params, 5)
    found = collected.block(params, 5)
    assert found[0] == indptr and found[1] == ids
    assert found[2].tobytes() == array("d", impacts).tobytes()
