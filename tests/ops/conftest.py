"""Knowledge folders whose versions differ by one document, for delta publish and gc."""

from __future__ import annotations

from pathlib import Path

import pytest

from router.compile.build import build_knowledge
from tests.common import write_doc

SHARED_DOCS = 120


def write_knowledge(folder: Path) -> None:
    """A shared partition of ``SHARED_DOCS`` documents (several chunks of every kind) and a
    tenant partition of three."""
    for d in range(SHARED_DOCS):
        words = " ".join(f"termo{(d * 7 + i) % 900} assunto{d}" for i in range(40))
        body = f"## Parte um\n\n{words}\n\n## Parte dois\n\nDetalhe {d} do procedimento {words}\n"
        write_doc(folder, f"shared/d{d:03}.md", _doc(f"shared.n{d}", f"Documento {d}", "*", body))
    for d in range(3):
        body = f"Procedimento interno {d} da acme sobre caldeiras e válvulas.\n"
        write_doc(folder, f"acme/a{d}.md", _doc(f"acme.n{d}", f"Interno {d}", "acme", body))


def edit_tenant_doc(folder: Path, text: str) -> None:
    write_doc(folder, "acme/a1.md", _doc("acme.n1", "Interno 1", "acme", text))


def _doc(semantic_id: str, title: str, tenant: str, body: str) -> str:
    return f'---\nsemanticId: {semantic_id}\ntitle: {title}\ntenant: "{tenant}"\n---\n{body}'


Files = dict[str, bytes]


@pytest.fixture(scope="package")
def versions(tmp_path_factory: pytest.TempPathFactory) -> list[Files]:
    """Three versions: the folder, then its tenant document edited twice."""
    folder = tmp_path_factory.mktemp("kb")
    write_knowledge(folder)
    out = [build_knowledge(folder).package.files()]
    for text in ("Texto novo sobre bombas hidráulicas.\n", "Terceira versão: compressores.\n"):
        edit_tenant_doc(folder, text)
        out.append(build_knowledge(folder).package.files())
    return out
