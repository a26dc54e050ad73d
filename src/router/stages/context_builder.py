"""Stage — the context package for an agent or LLM (PRD §35–36): knowledge as labelled data.

Why delimiters and flags: Markdown from the knowledge base may contain "ignore the previous
rules"; it must reach a model as quoted content, never as an instruction. Each chunk is wrapped in
a ``<knowledge>`` block naming its id and trust, and *everything* of the knowledge a model reads —
the document title, the section heading and the text — is inside it; angle brackets (and their
look-alikes) in knowledge text are escaped and invisible characters dropped, so no text can close
the block, open a forged one or spell a chat-template token. Instruction-like sentences are removed
from the chunk text, a flagged title or heading is replaced by a notice (in the block and in the
chunk's and reference's fields), and the chunk is flagged ``prompt_injection`` so callers can
withhold it (issue 12, finding 3).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from router.contract import (
    AgentKnowledgeContext,
    ConfidenceLevel,
    KnowledgeChunk,
    KnowledgeReference,
    UiContext,
)
from router.knowledge.model import Document, Section
from router.package.view import PackageView
from router.safety.fields import heading_flagged, title_flagged
from router.safety.injection import (
    INJECTION_FLAG,
    looks_like_injection,
    sentence_flags,
    visible_text,
)

if TYPE_CHECKING:
    from router.results import Fused
    from router.state import QueryState

__all__ = [
    "WITHHELD",
    "build_context",
    "context_for",
    "delimit",
    "neutralise",
    "shown_heading",
    "shown_title",
]

MAX_CHUNK_CHARS = 1500
WITHHELD = "[trecho omitido: contém instruções dirigidas a assistentes]"
# "<" and ">" and the characters a model may read as them: escaped, so knowledge text holds no tag.
_ANGLES = str.maketrans(
    {ch: "&lt;" for ch in "<\uff1c\ufe64\u2039\u2329\u27e8\u3008\u276e\u02c2"}
    | {ch: "&gt;" for ch in ">\uff1e\ufe65\u203a\u232a\u27e9\u3009\u276f\u02c3"}
)
_LINE_BREAKS = re.compile(r"\s*\n\s*")


def neutralise(text: str) -> str:
    """Knowledge text as it goes inside a block: invisible characters dropped, angle brackets
    and their look-alikes escaped (``</knowledge>``, ``<|im_start|>`` become plain text)."""
    return visible_text(text).translate(_ANGLES)


def delimit(chunk_id: str, trust: str, text: str, title: str = "", heading: str = "") -> str:
    """Wrap a chunk in a knowledge block: the title and heading (when given, one line each) and
    the text, all neutralised; nothing inside can end the block or forge another."""
    head = [f"{label}: {_LINE_BREAKS.sub(' ', neutralise(value))}" for label, value in
            (("title", title), ("heading", heading)) if value]  # fmt: skip
    body = "\n".join([*head, "", neutralise(text)] if head else [neutralise(text)])
    return f'<knowledge id="{chunk_id}" trust="{trust}">\n{body}\n</knowledge>'


def shown_title(doc: Document) -> str:
    """The title a response may show: a notice instead of a flagged one."""
    return WITHHELD if title_flagged(doc) else doc.title


def shown_heading(doc: Document, section: Section) -> str:
    """The heading a response may show: a notice instead of a flagged one (or a flagged title
    standing as the first section's heading)."""
    if heading_flagged(section) or (section.heading == doc.title and title_flagged(doc)):
        return WITHHELD
    return section.heading


def build_context(
    package: PackageView,
    query: str,
    ui: UiContext,
    ranked: Sequence[tuple[int, float]],
    confidence: float,
    level: ConfidenceLevel,
    texts: Mapping[int, str],
) -> AgentKnowledgeContext:
    """Chunks of the ranked sections (best first, their ``texts``) and the documents they come
    from."""
    chunks: list[KnowledgeChunk] = []
    references: dict[str, KnowledgeReference] = {}
    for section_index, score in ranked:
        section = package.sections[section_index]
        doc = package.documents[package.section_doc[section_index]]
        text, flags = _clean(texts.get(section_index, ""), section.flags)
        chunk_id = f"{doc.semantic_id}#{section.section_id.split('#')[-1]}"
        title, heading = shown_title(doc), shown_heading(doc, section)
        chunks.append(
            KnowledgeChunk(
                chunk_id=chunk_id,
                doc_id=doc.semantic_id,
                section_id=section.section_id,
                heading=heading,
                text=text,
                delimited=delimit(chunk_id, doc.trust, text, title, heading),
                score=round(score, 6),
                trust=doc.trust,
                flags=flags,
            )
        )
        references.setdefault(
            doc.semantic_id,
            KnowledgeReference(
                doc_id=doc.semantic_id,
                title=shown_title(doc),
                trust=doc.trust,
                version=doc.version,
                path=doc.path,
            ),
        )
    return AgentKnowledgeContext(
        query=query,
        ui_context=ui,
        references=list(references.values()),
        relevant_chunks=chunks,
        confidence=max(0.0, min(1.0, confidence)),
        confidence_level=level,
        knowledge_version=package.version,
    )


def _clean(text: str, section_flags: Sequence[str]) -> tuple[str, list[str]]:
    flags = list(section_flags)
    if not looks_like_injection(text):  # one scan for the common, clean case
        return text[:MAX_CHUNK_CHARS], flags
    kept = []
    for sentence, withheld in sentence_flags(text):
        if withheld and INJECTION_FLAG not in flags:
            flags.append(INJECTION_FLAG)
        kept.append(WITHHELD if withheld else sentence)
    return " ".join(kept)[:MAX_CHUNK_CHARS], flags


def context_for(state: QueryState, shown: Sequence[Fused]) -> AgentKnowledgeContext:
    """The context package of the sections shown to the caller, traced as ``context``."""
    request, verdict = state.request, state.verdict()
    ui = UiContext(tenant=request.tenant, page=request.page, tab=request.tab, focus=request.focus)
    context = build_context(
        state.package,
        request.query,
        ui,
        [(f.section, f.final) for f in shown],
        verdict.reported_value,
        verdict.reported_level,
        state.texts,
    )
    state.trace.stage("context", chunks=len(context.relevant_chunks))
    return context
