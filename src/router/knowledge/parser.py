"""Parser of one knowledge Markdown file (knowledge-format.md) into a :class:`Document`.

Why it reports ``file:line``: authors fix their Markdown from the message alone, so every
problem names the file and the line where it is.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import re
from typing import Any

import yaml

from router.analysis.text import normalize_text, slugify
from router.errors import KnowledgeFormatError
from router.knowledge.front_matter import MAX_FRONT_MATTER_CHARS, InvalidTimestamp, load_bounded
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
from router.knowledge.tenants import TENANT_ID_RULE, is_tenant_id

__all__ = ["SEMANTIC_ID", "WIKILINK", "parse_document", "strip_wikilinks"]

# Size limits per field (docs/knowledge-format.md, "Limits"). A file past one is a format error
# at the field's line: skipped and reported, or refused with ``--strict``. The front matter as a
# whole is bounded by ``router.knowledge.front_matter`` (characters, values, nesting, no aliases).
MAX_ID_CHARS = 200  # semanticId, and a section's {#id}
MAX_TITLE_CHARS = 300
MAX_DESCRIPTION_CHARS = 4_000
MAX_LIST_ITEMS = 100  # keywords, aliases, questions: items of each
MAX_ITEM_CHARS = 300  # one keyword, alias or question
MAX_SHORT_CHARS = 200  # version, application, module, entity, page, tab
MAX_FACTS = 200
MAX_FACT_CHARS = 2_000  # one fact's value, as text
MAX_METADATA_CHARS = 16_384  # every other key together, as JSON (kept in the document's record)

SEMANTIC_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*(?:\.[A-Za-z][A-Za-z0-9_-]*)*$")
_HEADING = re.compile(r"^(#{1,4})[ \t]+(.+?)[ \t]*$")
_HEADING_ID = re.compile(r"[ \t]*\{#([^}\s]+)\}$")
_FENCE = re.compile(r"^(```|~~~)")
_TOP_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)\s*:")
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
    if len(text) > MAX_FRONT_MATTER_CHARS:
        message = f"front matter is longer than {MAX_FRONT_MATTER_CHARS} characters"
        raise KnowledgeFormatError(path, 2, message)
    try:
        meta = load_bounded(text) or {}
    except yaml.YAMLError as exc:
        # the reporting loader's error: its mark is the problem's own line
        mark = getattr(exc, "problem_mark", None)
        line = (mark.line + 2) if mark is not None else 2
        problem = getattr(exc, "problem", None) or str(exc)
        key = _top_key_above(text.split("\n"), line - 2)
        where = f" in {key!r}" if key else ""
        message = f"invalid YAML front matter{where}: {problem}"
        raise KnowledgeFormatError(path, line, message) from exc
    if not isinstance(meta, dict):
        raise KnowledgeFormatError(path, 2, "front matter must be a mapping of keys to values")
    return meta, index + 1


def _top_key_above(lines: list[str], index: int) -> str | None:
    """The top-level key written at or above front-matter line ``index`` (0-based)."""
    for text in reversed(lines[: index + 1]):
        match = _TOP_KEY.match(text)
        if match is not None:
            return match.group(1)
    return None


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

    semantic_id = _required(meta, "semanticId", fail)
    if not SEMANTIC_ID.match(semantic_id) or len(semantic_id) > MAX_ID_CHARS:
        raise fail("semanticId", f"malformed semanticId {semantic_id[:MAX_ID_CHARS]!r}")
    title = _bounded(_required(meta, "title", fail), "title", MAX_TITLE_CHARS, fail)
    trust = _text(meta.get("trust", "official"))
    if trust not in TRUST_LEVELS:
        raise fail("trust", f"unknown trust {trust!r} (expected one of {', '.join(TRUST_LEVELS)})")
    status = _text(meta.get("status", "active"))
    if status not in DOCUMENT_STATUSES:
        raise fail("status", f"unknown status {status!r}")
    doc = Document(
        semantic_id=semantic_id,
        title=title,
        path=path,
        description=_bounded(
            _text(meta.get("description")), "description", MAX_DESCRIPTION_CHARS, fail
        ),
        keywords=_string_list(meta, "keywords", fail),
        aliases=_string_list(meta, "aliases", fail),
        questions=_questions(meta.get("questions"), path, lines),
        tenant=_tenant(meta.get("tenant"), fail),
        trust=trust,
        status=status,
        version=_bounded(_text(meta.get("version")), "version", MAX_SHORT_CHARS, fail),
        created_at=_date(meta, "createdAt", fail),
        updated_at=_date(meta, "updatedAt", fail),
        valid_from=_date(meta, "validFrom", fail),
        valid_until=_date(meta, "validUntil", fail),
        scope={
            k: _bounded(_text(meta[k]), k, MAX_SHORT_CHARS, fail)
            for k in _SCOPE_KEYS
            if meta.get(k) not in (None, "")
        },
        facts=_facts(meta.get("facts"), path, lines),
        metadata=_metadata(meta, fail),
    )
    if doc.valid_from and doc.valid_until and doc.valid_from > doc.valid_until:
        raise fail("validUntil", "validUntil is before validFrom")
    return doc


def _required(meta: dict[str, Any], key: str, fail: Any) -> str:
    """A required text key, stripped; a date or a number is not text (``title: 2024``)."""
    value = meta.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise fail(key, f"missing required key {key!r}")
    if not isinstance(value, str):
        raise fail(key, f"{key} must be text, not {_kind(value)} (quote it)")
    return value.strip()


def _bounded(text: str, key: str, limit: int, fail: Any) -> str:
    if len(text) > limit:
        raise fail(key, f"{key} is longer than {limit} characters ({len(text)})")
    return text


def _tenant(value: Any, fail: Any) -> str:
    """``tenant:``: ``"*"`` (every tenant, the default) or one tenant id
    (``router.knowledge.tenants``), the id a credential names: any other text would make a
    partition no credential can reach."""
    if value is None or value == "" or value == ALL_TENANTS:
        return ALL_TENANTS
    if not isinstance(value, str):
        raise fail("tenant", f"tenant must be text, not {_kind(value)} (quote it)")
    tenant = value.strip()
    if tenant == ALL_TENANTS:
        return ALL_TENANTS
    if not is_tenant_id(tenant):
        raise fail("tenant", f"invalid tenant {tenant[:80]!r}: {TENANT_ID_RULE}, or '*'")
    return tenant


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, dt.date):
        return "a date"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def _metadata(meta: dict[str, Any], fail: Any) -> dict[str, Any]:
    """The keys the format does not know, kept (JSON-safe) in the document's record."""
    metadata = {str(k): _jsonable(v) for k, v in meta.items() if k not in _KNOWN_KEYS}
    if metadata:
        size = len(json.dumps(metadata, ensure_ascii=False, default=str))
        if size > MAX_METADATA_CHARS:
            key = next(iter(metadata))
            message = (
                f"the keys the format does not know ({', '.join(list(metadata)[:5])}) take "
                f"{size} characters as JSON, more than {MAX_METADATA_CHARS}"
            )
            raise fail(key, message)
    return metadata


def _field_lines(doc: Document, lines: list[str]) -> dict[str, int]:
    """Where each front-matter field that reaches a response is written (``fact:<name>`` for a
    fact), so a warning about it names the line."""
    keys = ["semanticId", "title", "description", "keywords", "aliases", "version"]
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


def _string_list(meta: dict[str, Any], key: str, fail: Any) -> list[str]:
    """``keywords:``/``aliases:``: a list of scalars, or one comma-separated string."""
    value = meta.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        items = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, list) and not any(isinstance(v, dict | list) for v in value):
        items = [_text(v) for v in value if _text(v)]
    else:
        raise fail(key, f"{key} must be a list")
    if len(items) > MAX_LIST_ITEMS:
        raise fail(key, f"{key} has more than {MAX_LIST_ITEMS} items ({len(items)})")
    longest = max(items, key=len, default="")
    if len(longest) > MAX_ITEM_CHARS:
        raise fail(key, f"an item of {key} is longer than {MAX_ITEM_CHARS} characters")
    return items


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
    if len(items) > MAX_LIST_ITEMS:
        message = f"questions has more than {MAX_LIST_ITEMS} items ({len(items)})"
        raise KnowledgeFormatError(path, _key_line(lines, "questions"), message)
    questions = []
    for number, item in enumerate(items, start=1):
        if not isinstance(item, str) or len(item) > MAX_ITEM_CHARS:
            line = _nth_item_line(lines, "questions", number)
            what = _YAML_KINDS.get(type(item), "not a string")
            if isinstance(item, str):
                what = f"longer than {MAX_ITEM_CHARS} characters"
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


def _date(meta: dict[str, Any], key: str, fail: Any) -> str | None:
    """An ISO date key (``createdAt``...): a YAML date, or text that is one; anything else —
    ``2024-02-30``, which YAML reads as a timestamp that does not exist, a number, a list — is
    an error naming the key."""
    value = meta.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value.date().isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    problem = getattr(value, "problem", None)  # an InvalidTimestamp says why
    if problem is None and not isinstance(value, dict | list):
        try:
            return dt.date.fromisoformat(str(value).strip()).isoformat()
        except ValueError as exc:
            problem = str(exc)
    shown = str(value)[:40] if not isinstance(value, dict | list) else _kind(value)
    reason = f" ({problem})" if problem else ""
    raise fail(key, f"{key} is not a date: {shown!r}{reason}")


def _facts(value: Any, path: str, lines: list[str]) -> dict[str, FactValue]:
    """``facts:``: names to scalars; each problem is reported at the fact's own line."""
    if value is None:
        return {}
    facts_line = _key_line(lines, "facts")

    def fail(name: str | None, message: str) -> KnowledgeFormatError:
        line = facts_line
        if name is not None:
            line = _key_line(lines[facts_line - 1 :], name) + facts_line - 1
        return KnowledgeFormatError(path, line, message)

    if not isinstance(value, dict):
        raise fail(None, "facts must map names to values")
    if len(value) > MAX_FACTS:
        raise fail(None, f"facts has more than {MAX_FACTS} facts ({len(value)})")
    facts: dict[str, FactValue] = {}
    for name, fact in value.items():
        if not isinstance(name, str) or not SEMANTIC_ID.match(name) or "." in name:
            raise fail(None, f"malformed fact name {str(name)[:80]!r}")
        if len(name) > MAX_ID_CHARS:
            raise fail(None, f"fact name longer than {MAX_ID_CHARS} characters")
        if isinstance(fact, InvalidTimestamp):
            raise fail(name, f"fact {name!r} is not a date: {str(fact)!r} ({fact.problem})")
        if isinstance(fact, dt.date):
            fact = fact.isoformat()
        if not isinstance(fact, str | int | float | bool):
            raise fail(name, f"fact {name!r} must be a scalar (string, number, boolean, date)")
        if isinstance(fact, float) and not math.isfinite(fact):
            raise fail(name, f"fact {name!r} must be a finite number")
        if isinstance(fact, str) and len(fact) > MAX_FACT_CHARS:
            raise fail(name, f"fact {name!r} is longer than {MAX_FACT_CHARS} characters")
        facts[name] = fact
    return facts


def _jsonable(value: Any) -> Any:
    """An unknown key's value as plain JSON (its record is JSON): dates as ISO text, and what
    YAML's other tags give — ``!!binary`` bytes, ``!!set`` sets, ``!!omap`` pairs, ``.nan`` —
    as text or lists, in a fixed order, so the same file always gives the same record."""
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, str):
        return str(value)  # an InvalidTimestamp kept as its text
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((_jsonable(v) for v in value), key=repr)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
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
    if not SEMANTIC_ID.match(section_id) or len(section_id) > MAX_ID_CHARS:
        raise KnowledgeFormatError(path, line, f"malformed section id {section_id[:80]!r}")
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
