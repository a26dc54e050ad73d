"""Fixtures of the analysis tests: the texts of the golden and BEIR vocabularies, read once."""

from __future__ import annotations

import pytest

from router.compile.build import BuildResult
from tests.analysis.vocabularies import load_texts


@pytest.fixture(scope="session")
def vocabulary_texts(built: BuildResult) -> dict[str, list[str]]:
    return load_texts(built)
