"""Help-center sets: a knowledge folder with its own golden set, compiled in memory and asked as
the project's golden set is.

Why a second kind of set beside BEIR collections: a BEIR collection measures ranking on
passages, while a help center written independently of the engine (``knowledge/`` in the
knowledge format, ``golden.jsonl`` in the golden format, e.g. ``../shared/data/helpdesk-pt``)
measures everything the golden set does — abstention, fact values, tenants, dates — on a domain
nobody tuned the engine to. ``kr eval FOLDER`` reports it beside the golden set, and the gate
(``--extra FOLDER``) compiles it with the candidate's build configuration and the active one's.

Extra sets may also be named in ``$KR_EXTRA_SETS`` (paths separated by ``os.pathsep``): a clean
clone elsewhere on the machine may lack them, so a path that does not exist is skipped with a
note instead of failing the command.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kr.golden import GoldenQuery, load_golden
from kr.progress import say
from router.compile.corpus import KnowledgeCorpus, load_knowledge
from router.compile.embedding import PassageEncoder, embed_sections
from router.compile.indexer import BuildConfig, SectionEmbeddings, compile_documents
from router.errors import DatasetError
from router.package.reader import KnowledgePackage, load_package

__all__ = [
    "EXTRA_SETS_VARIABLE",
    "GOLDEN_FILE",
    "KNOWLEDGE_FOLDER",
    "HelpCenter",
    "extra_sets_from_env",
    "is_help_center",
]

KNOWLEDGE_FOLDER = "knowledge"
GOLDEN_FILE = "golden.jsonl"
EXTRA_SETS_VARIABLE = "KR_EXTRA_SETS"
"""Extra evaluation sets (help-center or BEIR folders) of ``kr eval`` without a target and of
every gate, separated by ``os.pathsep``; missing paths are skipped with a note."""


def is_help_center(folder: Path) -> bool:
    """A folder holding ``knowledge/`` and ``golden.jsonl`` (else: maybe a BEIR collection)."""
    return (folder / KNOWLEDGE_FOLDER).is_dir() and (folder / GOLDEN_FILE).is_file()


def extra_sets_from_env(environ: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """The existing folders of ``$KR_EXTRA_SETS``; each missing one is named in a note."""
    value = (os.environ if environ is None else environ).get(EXTRA_SETS_VARIABLE, "")
    found = []
    for item in value.split(os.pathsep):
        if not item.strip():
            continue
        path = Path(item.strip())
        if path.is_dir():
            found.append(path)
        else:
            say(f"note: {EXTRA_SETS_VARIABLE} names {path}, which is not here: skipped")
    return tuple(found)


@dataclass(frozen=True)
class HelpCenter:
    """A help-center set read once: its parsed knowledge and its queries; ``compile`` makes a
    package of it with any build configuration (the gate compiles it twice)."""

    folder: Path
    corpus: KnowledgeCorpus
    queries: list[GoldenQuery]

    @property
    def name(self) -> str:
        """The set's name in tables and under ``reports/``: its folder's."""
        return self.folder.resolve().name

    @classmethod
    def load(cls, folder: Path) -> HelpCenter:
        """Read ``folder``; a missing part or a knowledge error is a clear :class:`DatasetError`."""
        if not is_help_center(folder):
            raise DatasetError(
                f"{folder} is not a help-center set (a folder with {KNOWLEDGE_FOLDER}/ and "
                f"{GOLDEN_FILE})"
            )
        queries = load_golden(folder / GOLDEN_FILE)
        corpus = load_knowledge(folder / KNOWLEDGE_FOLDER)
        for diagnostic in corpus.errors:
            say(f"{folder.name}: skipped {diagnostic}")
        return cls(folder, corpus, queries)

    def embed(self, encoder: PassageEncoder | None) -> SectionEmbeddings | None:
        """Its section vectors (through the vector cache), once for every compile."""
        if encoder is None:
            return None
        return embed_sections(self.corpus.documents, encoder)

    def compile(
        self, config: BuildConfig, embeddings: SectionEmbeddings | None = None
    ) -> tuple[KnowledgePackage, dict[str, Any]]:
        """The package ``kr build`` would make of it with ``config`` (in memory), and build
        facts for the report."""
        started = time.perf_counter()
        source = {"files": len(self.corpus.documents), "skipped": len(self.corpus.errors)}
        compiled = compile_documents(
            self.corpus.documents, config, self.corpus.synonyms, source, embeddings
        )
        files = compiled.files()
        package = load_package(files["manifest.json"], files.__getitem__)
        facts = {
            "documents": len(self.corpus.documents),
            "sections": compiled.manifest.counts.get("sections"),
            "build_s": round(time.perf_counter() - started, 3),
            "knowledge_version": package.version,
        }
        return package, facts
