"""Stage — the context package for an agent or LLM (PRD §35–36): knowledge as labelled data.

Why delimiters and flags: Markdown from the knowledge base may contain "ignore the previous
rules"; it must reach a model as quoted content, never as an instruction. Each chunk is wrapped in
a ``<knowledge>`` block naming its id and trust; instruction-like sentences are removed from the
chunk text and the chunk is flagged ``prompt_injection`` so callers can withhold it.
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
from router.package.view import PackageView
from router.safety.injection import INJECTION_FLAG, looks_like_injection, split_sentences

if TYPE_CHECKING:
    from router.stages.fusion import Fused
    from router.state import QueryState

__all__ = ["build_context", "context_for", "delimit"]

MAX_CHUNK_CHARS = 1500
_KNOWLEDGE_TAG = re.compile(r"</?\s*knowledge", re.IGNORECASE)
WITHHELD = "[trecho omitido: contém instruções dirigidas a assistentes]"


def delimit(chunk_id: str, trust: str, text: str) -> str:
    """Wrap text in a knowledge block; a closing tag inside the text cannot end the block."""
    safe = _KNOWLEDGE_TAG.sub(lambda m: m.group(0).replace("<", "&lt;"), text)
    return f'<knowledge id="{chunk_id}" trust="{trust}">\n{safe}\n</knowledge>'


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
        chunks.append(
            KnowledgeChunk(
                chunk_id=chunk_id,
                doc_id=doc.semantic_id,
                section_id=section.section_id,
                heading=section.heading,
                text=text,
                delimited=delimit(chunk_id, doc.trust, text),
                score=round(score, 6),
                trust=doc.trust,
                flags=flags,
            )
        )
        references.setdefault(
            doc.semantic_id,
            KnowledgeReference(
                doc_id=doc.semantic_id,
                title=doc.title,
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
    for sentence in split_sentences(text):
        if looks_like_injection(sentence):
            if INJECTION_FLAG not in flags:
                flags.append(INJECTION_FLAG)
            kept.append(WITHHELD)
        else:
            kept.append(sentence)
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
