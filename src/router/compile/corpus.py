"""Reads a knowledge folder into documents and checks the rules that span files.

Why separate from the parser: one file can be judged alone (syntax, required keys), but duplicate
ids, overlapping validity windows and dangling wikilinks need the whole folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import yaml

from router.analysis.text import normalize_text
from router.compile.spill import SpilledDocuments
from router.errors import KnowledgeFormatError
from router.knowledge.front_matter import MAX_SYNONYM_NODES, load_bounded
from router.knowledge.model import Document
from router.knowledge.parser import parse_document
from router.safety.fields import flag_document

__all__ = [
    "BuildPhases",
    "Diagnostic",
    "KnowledgeCorpus",
    "ParsedDocuments",
    "build_failure",
    "knowledge_file_stats",
    "knowledge_files",
    "load_knowledge",
    "parse_knowledge_file",
]

BuildPhases = Callable[[str, int], Callable[[int], None]]
"""``phase(name, total)``: starts a phase of a long build ("parse" files, "compile" documents,
"write" files) and returns its ``advance(n)`` (``kr build`` draws a bar per phase)."""

SYNONYMS_FILE = "_synonyms.yml"


class ParsedDocuments(Protocol):
    """Documents parsed by earlier builds, by path and bytes (``kr.document_cache``): a file
    whose bytes did not change is not parsed again (incremental builds, docs/adr/0018)."""

    def get(self, path: str, raw: bytes) -> Document | None: ...

    def put(self, path: str, raw: bytes, doc: Document) -> None: ...


@dataclass(frozen=True)
class Diagnostic:
    """A build message tied to a place: ``path:line: message``."""

    level: str  # "error" | "warning"
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.level}: {self.path}:{self.line}: {self.message}"


@dataclass
class KnowledgeCorpus:
    """The documents of one folder, plus what the build found wrong with it: a list, or
    (``load_knowledge(spill=True)``) documents read back from disk one at a time."""

    root: str
    documents: Sequence[Document] = field(default_factory=list)
    synonyms: list[list[str]] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.level == "error"]


def build_failure(errors: list[Diagnostic]) -> KnowledgeFormatError:
    """The error a build fails with on ``errors`` (any, with ``--strict``; or those that left
    nothing to build): all of them, one per line, ``file:line: message`` each — an author
    fixes a folder from one run, not one file a run."""
    first = errors[0]
    listing = "\n".join(f"  {error.path}:{error.line}: {error.message}" for error in errors)
    return KnowledgeFormatError(first.path, first.line, f"{len(errors)} error(s):\n{listing}")


def knowledge_files(root: str | Path) -> list[str]:
    """The documents of a knowledge folder: every ``**/*.md`` relative path, sorted (so builds
    are reproducible), without those under a ``_`` or ``.`` folder or named so."""
    return [path for path, _, _ in knowledge_file_stats(root)]


def knowledge_file_stats(root: str | Path) -> list[tuple[str, int, int]]:
    """``knowledge_files`` with each file's size and mtime (ns), from one directory walk:
    ``os.scandir`` hands both over without a path object per file (213k files: 1.5 s, where
    ``rglob`` and a ``stat`` each took 7.4 s), which an incremental build's scan needs."""
    base = Path(root)
    if not base.is_dir():
        raise KnowledgeFormatError(str(base), 0, "knowledge folder does not exist")
    return sorted(_walk(str(base), ""))


def _walk(folder: str, prefix: str) -> Iterator[tuple[str, int, int]]:
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.startswith(("_", ".")):
                continue
            if entry.is_dir(follow_symlinks=False):
                yield from _walk(entry.path, f"{prefix}{entry.name}/")
            elif entry.name.endswith(".md"):
                stat = entry.stat()
                yield f"{prefix}{entry.name}", stat.st_size, stat.st_mtime_ns


def load_knowledge(
    root: str | Path,
    strict: bool = False,
    phases: BuildPhases | None = None,
    reuse: ParsedDocuments | None = None,
    spill: bool = False,
) -> KnowledgeCorpus:
    """Parse every document of ``root`` (``knowledge_files``), as the "parse" phase; with
    ``reuse``, a file parsed before with the same bytes is taken from it; with ``spill``, the
    documents are kept on disk (``SpilledDocuments``), not in memory.

    A file that breaks the format is reported and skipped; with ``strict`` the caller fails the
    build on any error (``build_failure``). So is a file that conflicts with an earlier one (the
    same id with an overlapping validity window, another file's section id).
    A field that reads like prompt injection is a warning (``router.safety.fields``): the file is
    built, its text kept as flagged data, as an unknown wikilink is.
    """
    base = Path(root)
    corpus = KnowledgeCorpus(root=str(base))
    files = knowledge_files(base)
    advance = phases("parse", len(files)) if phases is not None else None
    documents: list[Document] | SpilledDocuments = SpilledDocuments() if spill else []
    for relative in files:
        try:
            doc = _parsed(relative, (base / relative).read_bytes(), reuse)
        except KnowledgeFormatError as exc:
            corpus.diagnostics.append(Diagnostic("error", exc.path, exc.line, exc.detail))
        else:
            documents.append(doc)
            corpus.diagnostics += [Diagnostic("warning", relative, n, m) for n, m in doc.warnings]
        if advance is not None:
            advance(1)
    corpus.synonyms = _load_synonyms(base, corpus)
    kept = _check_duplicate_ids(documents, corpus.diagnostics)
    corpus.documents = (
        documents.select(kept)
        if isinstance(documents, SpilledDocuments)
        else [documents[index] for index in kept]
    )
    _check_links(corpus)
    return corpus


def parse_knowledge_file(path: str, raw: bytes | str) -> Document:
    """One knowledge file parsed (``KnowledgeFormatError`` names its line), then scanned for
    prompt injection: flagged fields and sections, and a warning each (``router.safety.fields``).

    Why the compiler scans and not the parser: the parser reads the knowledge format only; what
    the router makes of the text (flags, never quoted as instructions) is the compiler's."""
    doc = parse_document(path, raw)
    doc.warnings = [(f.line, f.message()) for f in flag_document(doc)]
    return doc


def _parsed(relative: str, raw: bytes, reuse: ParsedDocuments | None) -> Document:
    if reuse is None:
        return parse_knowledge_file(relative, raw)
    doc = reuse.get(relative, raw)
    if doc is None:
        doc = parse_knowledge_file(relative, raw)
        reuse.put(relative, raw, doc)
    return doc


def _load_synonyms(base: Path, corpus: KnowledgeCorpus) -> list[list[str]]:
    path = base / SYNONYMS_FILE
    if not path.is_file():
        return []
    try:
        text = normalize_text(path.read_text(encoding="utf-8"))
        data = load_bounded(text, max_nodes=MAX_SYNONYM_NODES) or []  # no alias bomb here either
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        corpus.diagnostics.append(Diagnostic("error", SYNONYMS_FILE, line, f"invalid YAML: {exc}"))
        return []
    groups = []
    for number, group in enumerate(data if isinstance(data, list) else [], start=1):
        if not isinstance(group, list) or len(group) < 2:
            corpus.diagnostics.append(
                Diagnostic("warning", SYNONYMS_FILE, number, "a group needs two or more terms")
            )
            continue
        groups.append([str(term).strip() for term in group if str(term).strip()])
    return groups


@dataclass(frozen=True, slots=True)
class _Kept:
    """What the duplicate check remembers of a kept document (not the document: at a million
    sections that would hold them all)."""

    semantic_id: str
    path: str
    tenant: str
    valid_from: str | None
    valid_until: str | None


def _check_duplicate_ids(documents: Sequence[Document], diagnostics: list[Diagnostic]) -> list[int]:
    """Same id + same tenant is allowed only for successive versions, whose validity windows do
    not overlap; and an explicit section id belongs to one document. A file that breaks either
    rule is skipped — the later one in path order, so the same folder always builds the same
    package — with an error naming both files (``--strict`` fails on it, as on any error).
    Returns the indices of the documents kept."""
    versions: dict[tuple[str, str], list[_Kept]] = {}
    owners: dict[str, _Kept] = {}
    kept: list[int] = []
    for index, doc in enumerate(documents):
        conflict = _conflict(doc, versions, owners)
        if conflict is not None:
            line, message = conflict
            diagnostics.append(
                Diagnostic("error", doc.path, line, f"{message}; {doc.path} is skipped")
            )
            continue
        kept.append(index)
        seen = _Kept(doc.semantic_id, doc.path, doc.tenant, doc.valid_from, doc.valid_until)
        versions.setdefault((doc.semantic_id.casefold(), doc.tenant), []).append(seen)
        for section in doc.sections:
            if section.explicit_id:
                owners.setdefault(section.section_id.casefold(), seen)
    return kept


def _conflict(
    doc: Document, versions: dict[tuple[str, str], list[_Kept]], owners: dict[str, _Kept]
) -> tuple[int, str] | None:
    """``(line, message)`` when ``doc`` clashes with a document already kept, else None."""
    for other in versions.get((doc.semantic_id.casefold(), doc.tenant), []):
        if _windows_overlap(other, doc):
            return doc.field_lines.get("semanticId", 1), (
                f"semanticId {doc.semantic_id!r} is also defined in {other.path} for the same "
                "tenant with an overlapping validity window (versions of one id need validFrom/"
                "validUntil windows that do not overlap)"
            )
    for section in doc.sections:
        if not section.explicit_id:
            continue
        owner = owners.get(section.section_id.casefold())
        if owner is not None and owner.semantic_id.casefold() != doc.semantic_id.casefold():
            return section.line, f"section id {section.section_id!r} is also used in {owner.path}"
    return None


def _windows_overlap(first: _Kept | Document, second: _Kept | Document) -> bool:
    if first.tenant != second.tenant:
        return False
    start = max(first.valid_from or "0000-00-00", second.valid_from or "0000-00-00")
    end = min(first.valid_until or "9999-99-99", second.valid_until or "9999-99-99")
    return start <= end


def _check_links(corpus: KnowledgeCorpus) -> None:
    known: set[str] = set()
    for doc in corpus.documents:  # one pass: spilled documents are read back for each
        known.add(doc.semantic_id.casefold())
        known.update(s.section_id.casefold() for s in doc.sections)
    for doc in corpus.documents:
        for section in doc.sections:
            for link in section.links:
                if link.target.casefold() not in known:
                    corpus.diagnostics.append(
                        Diagnostic(
                            "warning",
                            doc.path,
                            link.line,
                            f"wikilink to unknown id {link.target!r}",
                        )
                    )
