"""The text each section is embedded from, shared by the build, the benchmarks and the rerank
stage.

Why one function: section vectors are cached by the hash of this text, so the compiler, the
benchmarks, any re-embedding job and a reranker reading passages must produce exactly the same
string for the same section. It runs in the Worker (the rerank stage), so it imports nothing
of the build (the parser needs yaml, which the Worker does not have).
"""

from __future__ import annotations

from router.knowledge.model import Document, Section, strip_wikilinks

__all__ = ["MAX_PASSAGE_CHARS", "passage_text"]

MAX_PASSAGE_CHARS = 2000
"""e5-small reads at most 512 tokens; 2,000 characters is about that for pt/en prose."""


def passage_text(doc: Document, section: Section) -> str:
    """Breadcrumb (document title › heading), the questions the section answers (authored or
    generated, ``Document.questions_of``) one a line, then the section body without wikilink
    syntax. The questions come before the body so the ``MAX_PASSAGE_CHARS`` cut takes body text
    first; a section without questions embeds exactly as it did before they existed (its cached
    vector stays valid)."""
    body = strip_wikilinks(section.text).strip()
    first_line = body.split("\n", 1)[0].strip()
    crumbs: list[str] = []
    for crumb in (doc.title, section.heading):
        crumb = crumb.strip()
        if crumb and crumb not in crumbs and crumb != first_line:
            crumbs.append(crumb)
    head = " › ".join(crumbs)
    first = bool(doc.sections) and doc.sections[0] is section
    questions = "\n".join(doc.questions_of(section, first))
    if questions:
        body = f"{questions}\n{body}" if body else questions
    text = f"{head}\n{body}" if head and body else head or body
    return text[:MAX_PASSAGE_CHARS]
