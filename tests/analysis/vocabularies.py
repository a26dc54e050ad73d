"""The sets whose words the stemmer and text tests run over: the golden set's (the sample
knowledge's sections and the golden questions) and, when ../shared/data holds them, BEIR
collections' (SciFact in English, FaQuAD and Pirá in Portuguese: documents and questions)."""

from __future__ import annotations

import json

import pytest

from router.compile.beir import load_beir
from router.compile.build import BuildResult
from router.compile.indexer import section_index_text
from tests.common import GOLDEN, SHARED_DATA

VOCABULARIES = {
    "golden": "portuguese",
    "scifact": "english",
    "faquad-ir": "portuguese",
    "pira-pt": "portuguese",
}
"""Set → the language its analyzer runs in."""


def load_texts(built: BuildResult) -> dict[str, list[str]]:
    """Texts of each set of ``VOCABULARIES`` found here (the golden one always)."""
    golden = [
        section_index_text(doc, section, index == 0)
        for doc in built.corpus.documents
        for index, section in enumerate(doc.sections)
    ]
    with GOLDEN.open(encoding="utf-8") as lines:
        golden += [json.loads(line)["query"] for line in lines if line.strip()]
    texts = {"golden": golden}
    for name in VOCABULARIES:
        folder = SHARED_DATA / name
        if name != "golden" and (folder / "corpus.jsonl").is_file():
            collection = load_beir(folder)
            documents = [
                f"{doc.title}\n{section.text}"
                for doc in collection.documents
                for section in doc.sections
            ]
            texts[name] = documents + list(collection.queries.values())
    return texts


def texts_of(texts: dict[str, list[str]], name: str) -> list[str]:
    """The texts of one set, or a skip naming where it was looked for."""
    if name not in texts:
        pytest.skip(f"{name} not found under {SHARED_DATA}")
    return texts[name]
