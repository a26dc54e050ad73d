"""Parser of one knowledge Markdown file (knowledge-format.md) into a :class:`Document`.

Why it reports ``file:line``: authors fix their Markdown from the message alone, so every
problem names the file and the line where it is.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import yaml

from router.analysis.text import normalize_text, slugify
from router.errors import KnowledgeFormatError
from router.knowledge.model import (
    ALL_TENANTS,
    DOCUMENT_STATUSES,
    TRUST_LEVELS,
    WIKILINK,
    Document,
    FactValue,
    Link,
    Section,
    strip_wikilinks,
)

__all__ = ["SEMANTIC_ID", "WIKILINK", "parse_document", "strip_wikilinks"]

# libyaml's safe loader when PyYAML was built with it (8× faster on front matter: 22 % of a
# 100k-section build), else the pure-Python one; both build the same plain objects. Errors are
# reported by the pure-Python loader (its line numbers point at the problem).
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

SEMANTIC_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*(?:\.[A-Za-z][A-Za-z0-9_-]*)*$")
_HEADING = re.compile(r"^(#{1,4})[ \t]+(.+?)[ \t]*$")
_HEADING_ID = re.compile(r"[ \t]*\{#([^}\s]+)\}$")
_FENCE = re.compile(r"^(```|~~~)")
_SCOPE_KEYS = ("application", "module", "entity", "page", "tab")
_KNOWN_KEYS = frozenset(
    {
        "semanticId", "title", "description", "keywords", "aliases", "tenant", "trust", "status",
        "version", "createdAt", "updatedAt", "validFrom", "validUntil", "facts", "questions",
        *_SCOPE_KEYS,
    }
)  # fmt: skip
_QUESTIONS_FORM = "questions must be a list of questions (one string each)"
_YAML_KINDS = {
    dict: "a mapping (a ': ' inside an unquoted question? quote it)",
    list: "a nested list",
    bool: "a boolean (quote it)",
    int: "a number (quote it)",
    float: "a number (quote it)",
}


def parse_document(path: str, raw: bytes | str) -> Document:
    """Parse one file; raises :class:`KnowledgeFormatError` naming ``path`` and the line."""
    text = _decode(path, raw)
    lines = text.split("\n")
    meta, body_start = _front_matter(path, lines)
    doc = _document_from_meta(path, meta, lines)
    doc.sections = _sections(path, doc, lines, body_start)
    doc.field_lines = _field_lines(doc, lines)
    return doc


# -- decoding and front matter ----------------------------------------------------------------


def _decode(path: str, raw: bytes | str) -> str:
    if isinstance(raw, str):
        return normalize_text(raw)
    try:
        return normalize_text(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise KnowledgeFormatError(path, line, "file is not valid UTF-8") from exc


def _front_matter(path: str, lines: list[str]) -> tuple[dict[str, Any], int]:
    if not lines or lines[0].strip() != "---":
        raise KnowledgeFormatError(path, 1, "missing front matter: the file must start with '---'")
    for index in range(1, len(lines)):
        if lines[index].strip() == "---":
            break
    else:
        raise KnowledgeFormatError(path, 1, "front matter is not closed by a '---' line")
    text = "\n".join(lines[1:index])
    try:
        meta = yaml.load(text, Loader=YAML_LOADER) or {}
    except yaml.YAMLError:
        meta = _front_matter_error(path, text)
    if not isinstance(meta, dict):
        raise KnowledgeFormatError(path, 2, "front matter must be a mapping of keys to values")
    return meta, index + 1


def _front_matter_error(path: str, text: str) -> Any:
    """Re-read broken front matter with the pure-Python loader, whose error names the line
    where the problem is (libyaml's points at the end of the stream), and raise it."""
    try:
        return yaml.load(text, Loader=yaml.SafeLoader) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = (mark.line + 2) if mark is not None else 2
        problem = getattr(exc, "problem", None) or str(exc)
        raise KnowledgeFormatError(path, line, f"invalid YAML front matter: {problem}") from exc


def _key_line(lines: list[str], key: str) -> int:
    """Line (1-based) where a front-matter key is written, for error messages."""
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*:")
    for number, line in enumerate(lines, start=1):
        if pattern.match(line):
            return number
        if number > 1 and line.strip() == "---":
            break
    return 1


def _document_from_meta(path: str, meta: dict[str, Any], lines: list[str]) -> Document:
    def fail(key: str, message: str) -> KnowledgeFormatError:
        return KnowledgeFormatError(path, _key_line(lines, key), message)

    semantic_id = meta.get("semanticId")
    if not isinstance(semantic_id, str) or not semantic_id.strip():
        raise fail("semanticId", "missing required key 'semanticId'")
    semantic_id = semantic_id.strip()
    if not SEMANTIC_ID.match(semantic_id):
        raise fail("semanticId", f"malformed semanticId {semantic_id!r}")
    title = meta.get("title")
    if not isinstance(title, str) or not title.strip():
        raise fail("title", "missing required key 'title'")
    trust = str(meta.get("trust", "official")).strip()
    if trust not in TRUST_LEVELS:
        raise fail("trust", f"unknown trust {trust!r} (expected one of {', '.join(TRUST_LEVELS)})")
    status = str(meta.get("status", "active")).strip()
    if status not in DOCUMENT_STATUSES:
        raise fail("status", f"unknown status {status!r}")
    doc = Document(
        semantic_id=semantic_id,
        title=title.strip(),
        path=path,
        description=_text(meta.get("description")),
        keywords=_string_list(meta.get("keywords"), fail("keywords", "keywords must be a list")),
        aliases=_string_list(meta.get("aliases"), fail("aliases", "aliases must be a list")),
        questions=_questions(meta.get("questions"), path, lines),
        tenant=_text(meta.get("tenant")) or ALL_TENANTS,
        trust=trust,
        status=status,
        version=_text(meta.get("version")),
        created_at=_date(meta.get("createdAt"), fail("createdAt", "createdAt is not a date")),
        updated_at=_date(meta.get("updatedAt"), fail("updatedAt", "updatedAt is not a date")),
        valid_from=_date(meta.get("validFrom"), fail("validFrom", "validFrom is not a date")),
        valid_until=_date(meta.get("validUntil"), fail("validUntil", "validUntil is not a date")),
        scope={k: _text(meta[k]) for k in _SCOPE_KEYS if meta.get(k) not in (None, "")},
        facts=_facts(meta.get("facts"), fail),
        metadata={k: _jsonable(v) for k, v in meta.items() if k not in _KNOWN_KEYS},
    )
    if doc.valid_from and doc.valid_until and doc.valid_from > doc.valid_until:
        raise fail("validUntil", "validUntil is before validFrom")
    return doc


def _field_lines(doc: Document, lines: list[str]) -> dict[str, int]:
    """Where each front-matter field that reaches a response is written (``fact:<name>`` for a
    fact), so a warning about it names the line."""
    keys = ["title", "description", "keywords", "aliases", "version"]
    found = {key: _key_line(lines, key) for key in keys}
    for number, line in enumerate(_item_lines(lines, "questions", doc.questions), start=1):
        found[f"questions:{number}"] = line
    facts_line = _key_line(lines, "facts")
    for name in doc.facts:
        found[f"fact:{name}"] = _key_line(lines[facts_line - 1 :], name) + facts_line - 1
    return found


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip()


def _string_list(value: Any, error: KnowledgeFormatError) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or any(isinstance(v, dict | list) for v in value):
        raise error
    return [_text(v) for v in value if _text(v)]


def _questions(value: Any, path: str, lines: list[str]) -> list[str]:
    """``questions:``: a list of strings (a single string is one question, never split at
    commas: questions have them). Anything else — a mapping, a nested list, a number or a
    boolean, which YAML reads from an unquoted ``- 12`` or ``- yes`` — is an error at its line:
    it is almost always an indentation or quoting slip, and a silently dropped question is a
    paraphrase that silently stops matching."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise KnowledgeFormatError(path, _key_line(lines, "questions"), _QUESTIONS_FORM)
    questions = []
    for number, item in enumerate(items, start=1):
        if not isinstance(item, str):
            line = _nth_item_line(lines, "questions", number)
            what = _YAML_KINDS.get(type(item), "not a string")
            raise KnowledgeFormatError(path, line, f"{_QUESTIONS_FORM}; item {number} is {what}")
        if item.strip():
            questions.append(" ".join(item.split()))
    return questions


def _nth_item_line(lines: list[str], key: str, number: int) -> int:
    """Line of the ``number``-th ``- `` item of a block list under ``key`` (its key's line when
    the list is written inline, ``key: [a, b]``)."""
    start = _key_line(lines, key)
    seen = 0
    for index in range(start, len(lines)):
        text = lines[index]
        if text.strip() == "---" or (text[:1].strip() and not text.startswith("-")):
            break
        if text.lstrip().startswith("- ") or text.strip() == "-":
            seen += 1
            if seen == number:
                return index + 1
    return start


def _item_lines(lines: list[str], key: str, items: list[str]) -> list[int]:
    """Line of each item of a front-matter list under ``key``, for warnings about one item;
    the key's line for an item not found verbatim (inline lists, quoted or folded text)."""
    start = _key_line(lines, key)
    end = next((n for n in range(start, len(lines)) if lines[n].strip() == "---"), len(lines))
    found = []
    for item in items:
        probe = item[:40]
        hits = (n + 1 for n in range(start - 1, end) if probe and probe in lines[n])
        found.append(next(hits, start))
    return found


def _date(value: Any, error: KnowledgeFormatError) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value.date().isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    try:
        return dt.date.fromisoformat(str(value).strip()).isoformat()
    except ValueError:
        raise error from None


def _facts(value: Any, fail: Any) -> dict[str, FactValue]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise fail("facts", "facts must map names to values")
    facts: dict[str, FactValue] = {}
    for name, fact in value.items():
        if not isinstance(name, str) or not SEMANTIC_ID.match(name) or "." in name:
            raise fail("facts", f"malformed fact name {name!r}")
        if isinstance(fact, dt.date):
            fact = fact.isoformat()
        if not isinstance(fact, str | int | float | bool):
            raise fail(name, f"fact {name!r} must be a scalar (string, number, boolean, date)")
        facts[name] = fact
    return facts


def _jsonable(value: Any) -> Any:
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


# -- body -------------------------------------------------------------------------------------


def _sections(path: str, doc: Document, lines: list[str], start: int) -> list[Section]:
    """Split the body at headings; text before the first ``##`` belongs to the first section."""
    sections: list[Section] = []
    current: list[str] = []
    heading, level, line_no, explicit = doc.title, 1, start + 1, None
    first = start + 1  # line number of current[0]
    in_fence = False
    used_ids: set[str] = set()

    def close() -> None:
        body = "\n".join(current).strip()
        if not sections or body or heading != doc.title:
            section = _make_section(doc, heading, level, body, line_no, explicit, used_ids)
            blank = next((i for i, text in enumerate(current) if text.strip()), 0)
            section.text_line = first + blank
            sections.append(section)

    for number in range(start, len(lines)):
        line = lines[number]
        if _FENCE.match(line.strip()):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if match is None:
            current.append(line)
            continue
        new_level = len(match.group(1))
        new_heading, new_explicit = _heading_id(path, number + 1, match.group(2))
        if new_level == 1 and not sections and not "\n".join(current).strip():
            heading, line_no, explicit = new_heading, number + 1, new_explicit
            current, first = [], number + 2
            continue
        close()
        current, first = [], number + 2
        heading, level, line_no, explicit = new_heading, new_level, number + 1, new_explicit
    close()
    for section in sections:
        section.links = _links(section)
    return sections


def _heading_id(path: str, line: int, heading: str) -> tuple[str, str | None]:
    match = _HEADING_ID.search(heading)
    if match is None:
        return heading.strip(), None
    section_id = match.group(1)
    if not SEMANTIC_ID.match(section_id):
        raise KnowledgeFormatError(path, line, f"malformed section id {section_id!r}")
    return heading[: match.start()].strip(), section_id


def _make_section(
    doc: Document,
    heading: str,
    level: int,
    body: str,
    line: int,
    explicit: str | None,
    used_ids: set[str],
) -> Section:
    if explicit is not None:
        section_id = explicit
    else:
        base = f"{doc.semantic_id}#{slugify(heading) or 'section'}"
        section_id, suffix = base, 2
        while section_id in used_ids:
            section_id, suffix = f"{base}-{suffix}", suffix + 1
    used_ids.add(section_id)
    return Section(
        section_id=section_id,
        heading=heading,
        level=level,
        text=body,
        line=line,
        explicit_id=explicit is not None,
    )


def _links(section: Section) -> list[Link]:
    links = []
    for offset, text_line in enumerate(section.text.split("\n")):
        for match in WIKILINK.finditer(text_line):
            target = match.group(1).strip()
            label = (match.group(2) or target).strip()
            links.append(Link(section.section_id, target, label, section.text_line + offset))
    return links
