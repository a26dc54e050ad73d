"""Bounded YAML loading of a knowledge file's front matter (and of ``_synonyms.yml``).

Why bounded: front matter is written by anyone who can add a file, and plain YAML lets a 1 KB
file describe gigabytes — six levels of ``&a [*a, *a, …]`` under an unknown key wrote a 6.9 MB
records file, nine would write 7 GB. So, before any Python object is built:

- **aliases** (``*name``) are refused, with the line of the alias; anchors alone are harmless
  (and merge keys, ``<<: *a``, need an alias, so they go too). Nothing in a knowledge file needs
  them: every value is written once.
- the document is at most ``MAX_FRONT_MATTER_CHARS`` characters (checked by the parser),
  ``MAX_NODES`` YAML nodes and ``MAX_DEPTH`` levels of nesting.

And a value YAML cannot convert never escapes as a bare Python exception (``createdAt:
2024-02-30`` raised ``ValueError: day is out of range for month`` from inside PyYAML): a
timestamp that is no real date or time is kept as an :class:`InvalidTimestamp` (a ``str``, so
the parser says which field is not a date, and an unknown key keeps its text), and any other
conversion failure (``!!int abc``, a 5,000-digit integer, ``!!bool maybe``) is a YAML error at
the value's line.

Speed: :data:`FAST_LOADER` keeps libyaml's parser and composer (C) and checks the composed node
graph in one pass; a shared node in it is an alias. It names the anchor's line, not the alias's,
so on any error :func:`load_bounded` re-reads the text with :data:`REPORTING_LOADER` (pure
Python, which refuses an alias or a deep nesting at the event and whose marks are exact). On
the sample's front matter the bounded load costs ~100 µs a file, plain ``CSafeLoader`` ~90 µs,
the pure-Python loader ~800 µs.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node

__all__ = [
    "FAST_LOADER",
    "MAX_DEPTH",
    "MAX_FRONT_MATTER_CHARS",
    "MAX_NODES",
    "MAX_SYNONYM_NODES",
    "REPORTING_LOADER",
    "InvalidTimestamp",
    "load_bounded",
]

MAX_FRONT_MATTER_CHARS = 65_536  # the sample's longest is 731
MAX_NODES = 5_000  # scalars, lists and mappings (the sample's largest has ~40)
MAX_SYNONYM_NODES = 1_000_000  # ``_synonyms.yml``: groups of terms, no alias either
MAX_DEPTH = 16  # levels of values: the front matter's mapping is 1, a fact's value 3

ALIAS_PROBLEM = "aliases (*name) are not allowed: write each value out"

_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"


class InvalidTimestamp(str):
    """A scalar YAML reads as a timestamp that is no real one (``2024-02-30``, ``!!timestamp
    x``): its text, and ``problem`` (why). The parser refuses it where a date is due and keeps
    it as text elsewhere."""

    problem: str

    def __new__(cls, text: str, problem: str) -> InvalidTimestamp:
        value = super().__new__(cls, text)
        value.problem = problem
        return value

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return (InvalidTimestamp, (str(self), self.problem))


def _timestamp(loader: Any, node: Node) -> Any:
    try:
        return SafeConstructor.construct_yaml_timestamp(loader, node)  # type: ignore[arg-type]
    except (ValueError, AttributeError, TypeError) as exc:  # out of range; no match at all
        problem = str(exc) if isinstance(exc, ValueError) else "not a date or time"
        return InvalidTimestamp(str(node.value), problem)


class _Bounded:
    """What both loaders add to PyYAML's safe loader: the node-graph check before anything is
    constructed, and constructions that fail only as YAML errors (without a line here: the
    parser then re-reads with :data:`REPORTING_LOADER`, whose ``construct_object`` names it)."""

    max_nodes = MAX_NODES

    def get_single_data(self) -> Any:
        node = self.get_single_node()  # type: ignore[attr-defined]
        if node is None:
            return None
        check_nodes(node, self.max_nodes)
        try:
            return self.construct_document(node)  # type: ignore[attr-defined]
        except yaml.YAMLError:
            raise
        except _CONVERSION_ERRORS as exc:
            raise ConstructorError(None, None, f"cannot read a value: {exc}") from exc


_CONVERSION_ERRORS = (ValueError, TypeError, KeyError, AttributeError, OverflowError)


def check_nodes(root: Node, max_nodes: int = MAX_NODES) -> None:
    """Refuse a composed graph with a shared node (an alias), more than ``MAX_NODES`` nodes or
    deeper than ``MAX_DEPTH``. Level by level and iterative, and it stops at the first problem,
    so a graph built to expand exponentially costs no more than the file's own size to refuse."""
    seen: set[int] = set()
    level: list[Node] = [root]
    depth = 1
    while level:
        if depth > MAX_DEPTH:
            problem = f"nested deeper than {MAX_DEPTH} levels"
            raise ComposerError(None, None, problem, level[0].start_mark)
        below: list[Node] = []
        for node in level:
            if id(node) in seen:
                raise ComposerError(None, None, ALIAS_PROBLEM, node.start_mark)
            seen.add(id(node))
            value = node.value
            if isinstance(value, list):  # a sequence's nodes, or a mapping's (key, value) pairs
                if isinstance(node, MappingNode):
                    for pair in value:
                        below += pair
                else:
                    below += value
        if len(seen) > max_nodes:
            raise ComposerError(None, None, f"more than {max_nodes} values", root.start_mark)
        level = below
        depth += 1


class _Reporting:
    """The pure-Python loader's additions: an alias refused at its own line, a nesting past
    ``MAX_DEPTH`` refused before the composer recurses into it (its recursion would otherwise
    reach Python's limit on a ``[[[[…`` that libyaml accepts), and a value that cannot be
    converted named at its line."""

    _depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        if self.check_event(AliasEvent):  # type: ignore[attr-defined]
            mark = self.peek_event().start_mark  # type: ignore[attr-defined]
            raise ComposerError(None, None, ALIAS_PROBLEM, mark)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[attr-defined]
                raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
            return super().compose_node(parent, index)  # type: ignore[misc, no-any-return]
        finally:
            self._depth -= 1

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)  # type: ignore[misc]
        except yaml.YAMLError:
            raise
        except _CONVERSION_ERRORS as exc:
            value = node.value if isinstance(node.value, str) else node.tag
            problem = f"cannot read {value[:40]!r} as {node.tag.rsplit(':', 1)[-1]}: {exc}"
            raise ConstructorError(None, None, problem, node.start_mark) from exc


_C_LOADER = getattr(yaml, "CSafeLoader", None)


class _FastLoader(_Bounded, _C_LOADER or yaml.SafeLoader):  # type: ignore[misc]
    """libyaml's safe loader (8× faster on front matter: 22 % of a 100k-section build), bounded;
    the pure-Python one, bounded, when PyYAML was built without libyaml."""


class _ReportingLoader(_Reporting, _Bounded, yaml.SafeLoader):  # type: ignore[misc]
    """The pure-Python safe loader, bounded: slower, but its errors point at the problem."""


for _loader in (_FastLoader, _ReportingLoader):
    _loader.add_constructor(_TIMESTAMP_TAG, _timestamp)

FAST_LOADER: type = _FastLoader
REPORTING_LOADER: type = _ReportingLoader


def load_bounded(text: str, max_nodes: int = MAX_NODES) -> Any:
    """``text`` read as YAML within the bounds (at most ``max_nodes`` values): with
    :data:`FAST_LOADER`, and on any error again with :data:`REPORTING_LOADER`, whose
    ``yaml.YAMLError`` (raised) marks the problem's own line."""
    try:
        return _load(FAST_LOADER, text, max_nodes)
    except yaml.YAMLError:
        return _load(REPORTING_LOADER, text, max_nodes)


def _load(loader_class: type, text: str, max_nodes: int) -> Any:
    loader = loader_class(text)
    loader.max_nodes = max_nodes
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
