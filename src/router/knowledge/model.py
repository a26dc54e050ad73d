"""Plain records of parsed knowledge: documents, sections and links (shared by build and runtime).

Why plain dataclasses: the runtime rebuilds them from the package catalog without pydantic or
YAML, so they must be cheap to create and free of I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ALL_TENANTS",
    "DOCUMENT_STATUSES",
    "TRUST_LEVELS",
    "WIKILINK",
    "Document",
    "Link",
    "Section",
    "strip_wikilinks",
]

ALL_TENANTS = "*"
# Ranking preference, best first (knowledge-format.md "Trust").
TRUST_LEVELS: tuple[str, ...] = ("official", "verified", "generated", "draft", "deprecated")
DOCUMENT_STATUSES: tuple[str, ...] = ("active", "deprecated", "archived")

FactValue = str | int | float | bool

WIKILINK = re.compile(r"\[\[([^\]|\n]+?)(?:\|([^\]\n]+?))?\]\]")


def strip_wikilinks(text: str) -> str:
    """Replace ``[[target|label]]`` by its label (or target) for display and indexing."""
    return WIKILINK.sub(lambda m: (m.group(2) or m.group(1)).strip(), text)


@dataclass(frozen=True)
class Link:
    """A wikilink: an edge of the knowledge graph from a section to a document or section id."""

    source_section: str
    target: str
    label: str
    line: int


@dataclass
class Section:
    """A retrievable chunk: one heading and the text under it.

    ``text`` is set when parsing; in a loaded package it is empty, because section texts are read
    per query (``KnowledgePackage.texts``, docs/index-format.md). ``flags`` says what the build
    found in the section or its document (``prompt_injection`` and ``prompt_injection:<field>``,
    ``router.safety.fields``).
    """

    section_id: str
    heading: str
    level: int
    text: str
    line: int
    explicit_id: bool = False
    links: list[Link] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)
    # Line of the first line of ``text`` (blank lines after the heading are not in it): where
    # build messages about the body point. Only while building.
    text_line: int = field(default=0, compare=False, repr=False)


@dataclass
class Document:
    """One Markdown file of the knowledge folder.

    ``flags`` names the document's own fields that read like prompt injection (``title``,
    ``description``, ``keywords``, ``aliases``, ``version``, ``path``, ``fact:<name>``,
    ``questions:<n>``), so the answer never quotes them; it is stored in the document's record.

    ``questions`` (front matter ``questions:``) are questions the author says the document
    answers, in the words a user would ask them: doc2query written by hand, for paraphrases that
    share no word with the text. They are search text only — indexed with the description
    (``router.compile.fields``) and embedded with the first section
    (``router.vectors.passages``) — so they are not in the package's records and never reach a
    response. ``field_lines`` (where each front-matter key is written) and ``warnings``
    (``(line, message)`` the compiler's injection scan found) live only while building, for
    ``file:line`` messages.
    """

    semantic_id: str
    title: str
    path: str
    description: str = ""
    keywords: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)
    tenant: str = ALL_TENANTS
    trust: str = "official"
    status: str = "active"
    version: str = ""
    created_at: str | None = None
    updated_at: str | None = None
    valid_from: str | None = None
    valid_until: str | None = None
    scope: dict[str, str] = field(default_factory=dict)
    facts: dict[str, FactValue] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    sections: list[Section] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    field_lines: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    warnings: list[tuple[int, str]] = field(default_factory=list, compare=False, repr=False)

    @property
    def deprecated(self) -> bool:
        return self.trust == "deprecated" or self.status in ("deprecated", "archived")

    def questions_of(self, section: Section, first: bool) -> list[str]:
        """The questions ``section`` (the document's ``first`` one or not) answers, for search:
        the authored questions belong to the first section, as the description does; generated
        ones to the section they were written for. An authored question flagged as prompt
        injection (``questions:<n>`` in ``flags``) is left out: a question is search text only,
        and one that reads like an instruction could only serve to pull its document into the
        answers to instruction-like queries."""
        authored = [
            question
            for number, question in enumerate(self.questions, start=1)
            if first and f"questions:{number}" not in self.flags
        ]
        return [*authored, *section.questions]

    def valid_on(self, day: str) -> bool:
        """Whether the rule applies on ``day`` (ISO date; both bounds inclusive)."""
        if self.valid_from is not None and day < self.valid_from:
            return False
        return not (self.valid_until is not None and day > self.valid_until)

    def visible_to(self, tenant: str | None) -> bool:
        """A tenant sees shared documents and its own, never another tenant's."""
        return self.tenant == ALL_TENANTS or (tenant is not None and self.tenant == tenant)
