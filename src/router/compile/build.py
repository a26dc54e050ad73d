"""Knowledge folder → package: the one build path behind ``kr build`` and scripts/build_index.py."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from router.compile.corpus import (
    BuildPhases,
    KnowledgeCorpus,
    ParsedDocuments,
    build_failure,
    load_knowledge,
)
from router.compile.doc2query import Doc2Query
from router.compile.embedding import PassageEncoder, embed_sections
from router.compile.indexer import BuildConfig, CompiledPackage, compile_documents
from router.compile.staging import PackageFiles, StagedFiles

__all__ = ["BuildPhases", "BuildResult", "build_knowledge", "write_package"]


@dataclass(frozen=True)
class BuildResult:
    corpus: KnowledgeCorpus
    package: CompiledPackage


def build_knowledge(
    root: str | Path,
    config: BuildConfig | None = None,
    strict: bool = False,
    encoder: PassageEncoder | None = None,
    phases: BuildPhases | None = None,
    doc2query: Doc2Query | None = None,
    reuse: ParsedDocuments | None = None,
    spill: bool = False,
    store: StagedFiles | None = None,
) -> BuildResult:
    """Parse and compile a knowledge folder. Errors fail the build only with ``strict`` (all of
    them listed); otherwise each file in error is skipped and reported. With an ``encoder`` the
    package carries section vectors (cached by text, see compile/vector_cache.py). ``phases``
    hears of the progress (a million sections take minutes). With ``doc2query`` an LLM writes
    questions for every section first (compile/doc2query.py), indexed and embedded with it; a
    generator error fails the build rather than leave some sections without. ``reuse`` holds
    the documents of earlier builds (a file whose bytes did not change is not parsed again).
    ``spill`` keeps the parsed documents on disk, read back one at a time by each step
    (``router.compile.spill``: bounded memory at a million sections) — not with an ``encoder``
    or ``doc2query``, whose steps hold or change the documents themselves. ``store`` takes
    the package's files as they are made (``router.compile.staging``), not held in memory."""
    spill = spill and encoder is None and doc2query is None
    corpus = load_knowledge(root, strict=strict, phases=phases, reuse=reuse, spill=spill)
    if corpus.errors and (strict or not corpus.documents):  # nothing left: say why
        raise build_failure(corpus.errors)
    source = {"files": len(corpus.documents), "skipped": len(corpus.errors)}
    if doc2query is not None:
        source["generated_questions"] = doc2query.write(corpus.documents)
    embeddings = None
    if encoder is not None:
        embeddings = embed_sections(corpus.documents, encoder, phases=phases)
    compiling = phases("compile", len(corpus.documents)) if phases is not None else None
    package = compile_documents(
        corpus.documents,
        config,
        corpus.synonyms,
        source,
        embeddings,
        advance=compiling,
        store=store,
    )
    return BuildResult(corpus, package)


def write_package(
    package: CompiledPackage, out_dir: str | Path, phases: BuildPhases | None = None
) -> Path:
    """Write the package files to ``out_dir/<version>/``."""
    target = Path(out_dir) / package.knowledge_version
    target.mkdir(parents=True, exist_ok=True)
    files = package.files()
    writing = phases("write", len(files)) if phases is not None else None
    staged = files.staged if isinstance(files, PackageFiles) else None
    for name in files:
        if staged is not None and name in staged:
            staged.copy_to(name, target / name)  # not read into memory
        else:
            (target / name).write_bytes(files[name])
        if writing is not None:
            writing(1)
    return target
