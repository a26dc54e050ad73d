"""Fixtures of the fault tests: a second, newer version of the knowledge (built once)."""

from __future__ import annotations

import pytest

from router.compile.build import BuildResult, build_knowledge
from tests.common import write_doc


@pytest.fixture(scope="package")
def newer(tmp_path_factory: pytest.TempPathFactory) -> BuildResult:
    """A one-document knowledge folder built: the version activated after the sample's."""
    folder = tmp_path_factory.mktemp("kb-newer")
    write_doc(
        folder,
        "only.md",
        "---\nsemanticId: only.doc\ntitle: Documento novo\n---\nConteúdo da versão nova.\n",
    )
    return build_knowledge(folder)
