"""Synthetic knowledge corpus: a deterministic, Portuguese-like knowledge folder of any size.

    python bench/synthetic_corpus.py --sections 100000 --out /work/synthetic/100k \
        [--seed 1] [--tenants 20] [--tenant-share 0.1] [--force]

Writes, in the input contract of ../shared/knowledge-format.md (``kr build --strict`` clean: no
error, no warning):

- ``<area>/<semantic-id>.md``: the shared documents, one folder per group of modules;
- ``tenants/<tenant>/<semantic-id>.md``: the tenant-only documents;
- ``_synonyms.yml``: acronym groups, as the sample's;
- ``_queries.jsonl``: a query set in eval/golden.jsonl's fields whose answers are known by
  construction (``kr eval OUT/_queries.jsonl --package PKG`` scores it);
- ``_corpus.json``: the arguments and the counts.

Why these shapes: every distribution below was measured on ``knowledge/`` (84 documents, 373
sections): sections per document, words per section (log-normal), heading levels, share of
explicit section ids, wikilinks per section, keywords, aliases and facts per document, trust
levels, the depth of semantic ids, the share of tenant-only documents and of stopwords. The words
are built from Portuguese syllables and endings (accents, ``ç``, ``-ção/-ções``, ``-mento/-mentos``
...) and kept only when the build's analyzer gives the singular and the plural one term and no
other word that term; they are drawn from a Zipf law (s = 1.1) over a vocabulary sized by Heaps'
law fitted on the sample (V = 10 · N^0.556 for N content tokens).

Why the answers are known: a few documents ("probes") carry a word that no other document has
(a *signature*, reserved outside the Zipf vocabulary), so a query for it has one right answer
whatever the corpus size; exact ids, aliases and fact addresses are unique by construction.

Determinism: every draw comes from a ``random.Random`` seeded with a string (hashed with SHA-512,
independent of PYTHONHASHSEED); documents are planned, then rendered one at a time from their own
seed, so memory stays bounded by the plan (a few hundred bytes per document). Same arguments give
byte-identical files.
"""

from __future__ import annotations

import argparse
import bisect
import datetime as dt
import itertools
import json
import math
import random
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import Stemmer

from router.analysis.analyzer import Analyzer, AnalyzerConfig
from router.analysis.text import fold, has_diacritics, slugify

__all__ = ["CorpusSpec", "generate", "main"]

GENERATOR_VERSION = 1
QUERY_DAY = "2026-06-15"  # the date every generated query is asked on (validity is date-bound)
PAST_DAY = "2025-06-10"  # a date inside the first version of the versioned rules
VERSION_SPLIT = "2026-01-01"  # versioned rules: v1 until the day before, v2 from this day
EXPIRED_UNTIL = "2025-06-30"  # probes that expired before QUERY_DAY
LAST_DAY = "2026-11-30"  # nothing is created or updated after this day

# -- distributions measured on knowledge/ (see the module docstring) ----------------------------

SECTIONS_PER_DOC = {3: 4, 4: 54, 5: 16, 6: 6, 7: 3, 8: 1}  # histogram of knowledge/
LONG_DOC_SHARE = 0.03  # a tail the sample is too small to show: 9–16 sections
WORDS_LOG_MEAN, WORDS_LOG_SD = 3.37, 0.44  # ln(words per section): mean 32, median 30
WORDS_MIN, WORDS_MAX = 5, 400
LEVEL3_SHARE, LEVEL4_SHARE = 0.05, 0.1  # after a ## / after a ### (the sample has one ###)
EXPLICIT_ID_SHARE = 0.75  # 217 of the 289 sections after the first carry {#id}
LIST_SHARE, SECOND_PARAGRAPH_SHARE = 0.15, 0.1  # 55 of 373 sections hold a list
LINKS_PER_SECTION = {0: 0.3, 1: 0.35, 2: 0.2, 3: 0.1, 4: 0.05}  # mean 1.25 (sample: 1.19)
LINK_TO_SECTION_SHARE = 0.2
KEYWORDS_RANGE = (4, 8)  # mean 6.1
ALIASES = {0: 0.5, 1: 0.25, 2: 0.25}
FACTS = {0: 0.32, 1: 0.25, 2: 0.25, 3: 0.13, 4: 0.03, 5: 0.02}
TRUST = {"official": 0.77, "verified": 0.155, "generated": 0.035, "draft": 0.025}
DEPRECATED_SHARE, ARCHIVED_SHARE = 0.012, 0.004
VALID_UNTIL_SHARE, EXPIRED_SHARE, FUTURE_SHARE = 0.05, 0.015, 0.01
VERSIONED_SHARE = 0.01  # documents written as two successive versions of one rule
PAGE_SHARE, TAB_SHARE, ENTITY_SHARE = 0.12, 0.5, 0.6
MODULE_SIZE_LOG_MEAN, MODULE_SIZE_LOG_SD = 1.0, 0.8  # ~3.7 documents per module: 29 % depth 1
MODULES_PER_AREA = 5
PARENT_WEIGHT_BY_DEPTH = {1: 6.0, 2: 1.2, 3: 0.4}
STOPWORD_SHARE = 0.36  # of the sample's words
TOPIC_SHARE = 0.1  # words of a section drawn from its document's own topic
PLURAL_SHARE = 0.2
ZIPF_S = 1.1
HEAPS_K, HEAPS_BETA = 10.0, 0.556  # fitted on knowledge/: 1,000 → 471 and 8,494 → 1,524 terms
MIN_VOCABULARY = 600
TOPIC_RANK_OFFSET = 40  # ids and titles use mid-frequency words, not the commonest
TENANT_SHARE = 0.1  # 8 of the sample's 84 documents are tenant-only

# Frequent Portuguese function words, most frequent first (drawn with a Zipf law of their own).
FUNCTION_WORDS = (
    "de", "a", "o", "que", "e", "do", "da", "em", "um", "para", "com", "não", "uma", "os", "no",
    "se", "na", "por", "mais", "as", "dos", "como", "mas", "ao", "das", "à", "seu", "sua", "ou",
    "quando", "nos", "já", "também", "só", "pelo", "pela", "até", "isso", "entre", "depois",
    "sem", "mesmo", "aos", "seus", "quem", "nas", "esse", "essa", "num", "nem", "suas", "às",
    "numa", "pelos", "qual", "lhe", "essas", "esses", "pelas", "este", "esta", "estes", "estas",
    "isto", "está", "estão", "foi", "ser", "tem", "são", "há", "deve", "pode", "cada", "todo",
    "toda", "antes", "sobre",
)  # fmt: skip
_YAML_SPECIAL = frozenset(("y", "n", "yes", "no", "on", "off", "true", "false", "null"))

# -- Portuguese-like word shapes --------------------------------------------------------------

_ONSETS = (
    ("", 8), ("b", 3), ("c", 5), ("d", 5), ("f", 3), ("g", 2), ("j", 1), ("l", 4), ("m", 5),
    ("n", 3), ("p", 5), ("r", 4), ("s", 5), ("t", 6), ("v", 3), ("ch", 1), ("br", 1), ("cr", 1),
    ("pr", 2), ("tr", 2), ("gr", 1), ("fr", 1), ("bl", 0.5), ("pl", 1), ("cl", 0.5),
)  # fmt: skip
_INNER_ONSETS = (*_ONSETS[1:], ("lh", 1), ("nh", 1), ("ç", 1.5), ("rr", 1), ("ss", 1))
_VOWELS = (("a", 28), ("e", 22), ("o", 20), ("i", 16), ("u", 8))
_CODAS = (("", 80), ("r", 6), ("s", 6), ("l", 4), ("n", 4))
_ACCENTED = {"a": "áâ", "e": "éê", "i": "í", "o": "óô", "u": "ú"}
# (singular ending, plural ending, accent the vowel before it, weight)
_ENDINGS = (
    ("a", "as", False, 20), ("o", "os", False, 20), ("e", "es", False, 8),
    ("ção", "ções", False, 8), ("são", "sões", False, 2), ("ão", "ões", False, 3),
    ("dade", "dades", False, 4), ("mento", "mentos", False, 5), ("agem", "agens", False, 2),
    ("ência", "ências", False, 2), ("ância", "âncias", False, 1), ("ário", "ários", False, 2),
    ("eiro", "eiros", False, 2), ("eira", "eiras", False, 2), ("ista", "istas", False, 1),
    ("al", "ais", False, 2), ("or", "ores", False, 3), ("ura", "uras", False, 2),
    ("ico", "icos", True, 2), ("ica", "icas", True, 2), ("ança", "anças", False, 1),
    ("aço", "aços", False, 1), ("ável", "áveis", False, 1), ("ivo", "ivos", False, 2),
)  # fmt: skip
_STEM_SYLLABLES = ((1, 3), (2, 5), (3, 2))
_ACCENT_SHARE = 0.15

# Facts: (name suffix, unit written in the text, plausible values)
_NUMBER_FACTS = (
    ("Days", "dias", (1, 2, 3, 5, 7, 10, 15, 30, 45, 60, 90, 180, 365)),
    ("Hours", "horas", (1, 2, 4, 8, 12, 16, 24, 48, 72)),
    ("Months", "meses", (1, 3, 6, 12, 18, 24, 36)),
    ("Years", "anos", (1, 2, 3, 5, 10, 20)),
    ("Percent", "%", (5, 10, 15, 20, 25, 50, 80, 100)),
    ("Meters", "metros", (1, 2, 3, 5, 10, 15, 30)),
    ("Kg", "kg", (5, 10, 20, 25, 50, 100)),
    ("Count", "", (1, 2, 3, 4, 5, 6, 8, 10, 12, 20)),
)
_NUMBER_PREFIXES = ("max", "min", "default", "review", "warning", "retention", "")
_BOOL_SUFFIXES = ("Required", "Allowed", "Enabled", "BeforeUse")
_STRING_SUFFIXES = ("Approver", "Owner", "Issuer", "Code")

# Query categories and how many of each (fewer on small corpora).
QUERY_COUNTS = {
    "exact_id": 20, "exact_section": 10, "alias": 10, "fact": 10, "keyword": 30, "plural": 10,
    "accent": 10, "term": 20, "tenant": 15, "tenant_shared": 5, "temporal": 5, "expired": 5,
    "deprecated": 5, "out_of_scope": 10,
}  # fmt: skip


def _weighted(pairs: Sequence[tuple[Any, float]]) -> tuple[list[Any], list[float]]:
    values = [p[0] for p in pairs]
    return values, list(itertools.accumulate(p[1] for p in pairs))


def _pick(rng: random.Random, table: tuple[list[Any], list[float]]) -> Any:
    values, cumulative = table
    return values[bisect.bisect(cumulative, rng.random() * cumulative[-1])]


_ONSET_T = _weighted(_ONSETS)
_INNER_T = _weighted(_INNER_ONSETS)
_VOWEL_T = _weighted(_VOWELS)
_CODA_T = _weighted(_CODAS)
_ENDING_T = _weighted([(e[:3], e[3]) for e in _ENDINGS])
_STEM_T = _weighted(_STEM_SYLLABLES)
_TRUST_T = _weighted(list(TRUST.items()))
_ALIASES_T = _weighted(list(ALIASES.items()))
_FACTS_T = _weighted(list(FACTS.items()))
_LINKS_T = _weighted(list(LINKS_PER_SECTION.items()))
_SECTIONS_T = _weighted(list(SECTIONS_PER_DOC.items()))


def _accent_last_vowel(stem: str, rng: random.Random) -> str:
    for i in range(len(stem) - 1, -1, -1):
        marks = _ACCENTED.get(stem[i])
        if marks:
            return stem[:i] + rng.choice(marks) + stem[i + 1 :]
    return stem


def _word_shape(rng: random.Random) -> tuple[str, str]:
    """One Portuguese-like (singular, plural) pair: syllables + a derivational ending."""
    parts = []
    for index in range(_pick(rng, _STEM_T)):
        onset = _pick(rng, _ONSET_T if index == 0 else _INNER_T)
        vowel = _pick(rng, _VOWEL_T)
        if onset == "ç" and vowel in "ei":
            onset = "c"
        parts.append(onset + vowel + _pick(rng, _CODA_T))
    stem = "".join(parts)
    singular, plural, accent_before = _pick(rng, _ENDING_T)
    if singular[0] in "aeiouáâãéêíóôõú" and stem[-1] in "aeiou":
        stem += _pick(rng, _INNER_T)  # no hiatus between the stem and the ending
    if accent_before or (not has_diacritics(singular) and rng.random() < _ACCENT_SHARE):
        stem = _accent_last_vowel(stem, rng)
    return stem + singular, stem + plural


@dataclass(frozen=True)
class Word:
    """A lemma: its singular, its plural (the singular when the stemmer would not fold it) and
    its ASCII form for semantic ids."""

    singular: str
    plural: str
    ascii: str


class Vocabulary:
    """Distinct Portuguese-like words, each one index term of the build's analyzer.

    ``pool`` is the Zipf vocabulary (short words first, as frequent words are); ``reserved``
    words never occur in it and serve as signatures of probe documents and out-of-scope queries.
    """

    def __init__(self, seed: str, size: int, reserved: int) -> None:
        rng = random.Random(f"{seed}:vocabulary")
        analyzer = Analyzer(AnalyzerConfig(), stem=Stemmer.Stemmer("portuguese").stemWord)
        seen_terms: set[str] = set()
        seen_folds: set[str] = set()
        words: list[Word] = []

        def draw(count: int) -> None:
            while len(words) < count:
                singular, plural = _word_shape(rng)
                folded = fold(singular)
                if len(folded) < 4 or folded in seen_folds or folded in _YAML_SPECIAL:
                    continue
                terms = analyzer.terms(singular)
                if len(terms) != 1 or terms[0] in seen_terms:
                    continue
                if analyzer.terms(plural) != terms or fold(plural) in seen_folds:
                    plural = singular
                seen_terms.add(terms[0])
                seen_folds.update((folded, fold(plural)))
                words.append(Word(singular, plural, folded))

        draw(size + 2 * reserved)  # twice: reserved words with a twin are dropped
        pool = words[:size]
        order = sorted(range(size), key=lambda i: len(pool[i].singular) + 3 * rng.random())
        self.pool = [pool[i] for i in order]
        # A reserved word is never one typo from another word: a query for it has one answer,
        # and a caller who cannot see its document gets an abstention, not a "correction".
        extra = 2 * reserved
        while True:  # a larger pool has more near twins: draw more candidates until enough
            twins = _near_twins(words)
            self.reserved = [w for w in words[size:] if fold(w.singular) not in twins][:reserved]
            if len(self.reserved) == reserved or extra > 64 * reserved:
                break
            extra *= 2
            draw(size + extra)
        if len(self.reserved) < reserved:
            raise ValueError(f"only {len(self.reserved)} of {reserved} reserved words are unique")
        self._cumulative = list(itertools.accumulate(r**-ZIPF_S for r in range(1, size + 1)))
        self._function = list(
            itertools.accumulate(r**-1.0 for r in range(1, len(FUNCTION_WORDS) + 1))
        )

    def zipf_rank(self, rng: random.Random) -> int:
        return bisect.bisect(self._cumulative, rng.random() * self._cumulative[-1])

    def topic_word(self, rng: random.Random) -> int:
        """A mid-frequency word (ids, titles, headings): Zipf over ranks past the commonest."""
        offset = min(TOPIC_RANK_OFFSET, len(self.pool) // 4)
        return min(len(self.pool) - 1, offset + self.zipf_rank(rng))

    def function_word(self, rng: random.Random) -> str:
        index = bisect.bisect(self._function, rng.random() * self._function[-1])
        return FUNCTION_WORDS[index]


def heaps_vocabulary(sections: int) -> int:
    """Zipf vocabulary size for a corpus: Heaps' law on its expected content tokens."""
    tokens = sections * math.exp(WORDS_LOG_MEAN + WORDS_LOG_SD**2 / 2) * (1 - STOPWORD_SHARE)
    return max(MIN_VOCABULARY, round(HEAPS_K * float(tokens**HEAPS_BETA)))


# -- the plan ---------------------------------------------------------------------------------


@dataclass(slots=True)
class DocPlan:
    """What the renderer needs to know about a document before writing any (links, ids)."""

    index: int
    semantic_id: str
    path: str
    tenant: str
    module: int  # index of the module's root document (itself for a root)
    parent: int | None
    depth: int
    sections: int
    topic: tuple[int, ...]  # pool indices of the words of its own id segment
    trust: str = "official"
    status: str = "active"
    version: int = 1
    valid_from: str | None = None
    valid_until: str | None = None
    aliases: tuple[str, ...] = ()
    page: str | None = None
    tab: str | None = None
    entity: bool = False
    versioned: int = 0  # 0: one version; 1 / 2: first / second file of one rule
    signature: int | None = None  # reserved word in the title, keywords and body
    planted: int | None = None  # reserved word in the body of one section (term probes)
    shared: int | None = None  # reserved word shared by one document of every tenant
    role: str = ""

    @property
    def eligible(self) -> bool:
        """Visible on QUERY_DAY to its tenant, and alone under its id: fit to be a probe."""
        return (
            self.status == "active"
            and self.trust in ("official", "verified")
            and self.valid_until is None
            and (self.valid_from or "") <= VERSION_SPLIT
            and self.versioned == 0
            and not self.role
        )


@dataclass(frozen=True)
class CorpusSpec:
    """The arguments of one corpus; the same spec always gives the same bytes."""

    sections: int
    seed: int = 1
    tenants: int = 20
    tenant_share: float = TENANT_SHARE

    def __post_init__(self) -> None:
        if self.sections < 20:
            raise ValueError("--sections must be at least 20")
        if self.tenants < 0 or not 0.0 <= self.tenant_share < 1.0:
            raise ValueError("--tenants must be >= 0 and --tenant-share in [0, 1)")


def _camel(words: Sequence[str]) -> str:
    return words[0] + "".join(w[:1].upper() + w[1:] for w in words[1:])


def _kebab(camel: str) -> str:
    return "".join("-" + c.lower() if c.isupper() else c for c in camel)


def _id_path(semantic_id: str) -> str:
    return ".".join(_kebab(part) for part in semantic_id.split("."))


class Planner:
    """Lays out every document: ids, tree, folders, tenants, validity, trust, probes."""

    def __init__(self, spec: CorpusSpec, vocabulary: Vocabulary) -> None:
        self.spec = spec
        self.vocabulary = vocabulary
        self.rng = random.Random(f"kr-synthetic:{spec.seed}:plan")
        self.docs: list[DocPlan] = []
        self.ids: set[str] = set()  # casefolded semantic ids (and tenant namespaces)
        self.aliases: set[str] = set()
        self.tenants: list[tuple[str, str]] = []  # (tenant id, id namespace)
        self.module_roots: list[int] = []
        self.module_range: dict[int, range] = {}
        self.tenant_docs: dict[str, range] = {}
        self.next_reserved = 0
        self.pairs = self.min_pairs = 0  # versioned rules made / wanted at least

    def reserve(self) -> int:
        index = self.next_reserved
        self.next_reserved += 1
        return index

    # -- ids --------------------------------------------------------------------------------

    def _segment(self, prefix: str, words: int = 1) -> tuple[str, tuple[int, ...]]:
        """A new id segment under ``prefix`` (camelCase of 1–3 topic words), unique."""
        for attempt in range(200):
            count = 1 if attempt < 3 and self.rng.random() < 0.7 else 2 + (attempt > 20)
            count = max(count, words)
            topic = tuple(self.vocabulary.topic_word(self.rng) for _ in range(count))
            segment = _camel([self.vocabulary.pool[i].ascii for i in topic])
            full = f"{prefix}.{segment}" if prefix else segment
            if full.casefold() not in self.ids:
                self.ids.add(full.casefold())
                return full, topic
        raise RuntimeError("the vocabulary is too small for this many documents")

    def _alias(self, topic: tuple[int, ...]) -> str | None:
        """Another name: word, function word, two words. Titles alternate word / function word
        and so have an odd length: an alias can never be another document's exact title."""
        pool = self.vocabulary.pool
        for _ in range(10):
            words = [pool[topic[0]].singular, self.vocabulary.function_word(self.rng)]
            words += [pool[self.vocabulary.topic_word(self.rng)].singular for _ in range(2)]
            alias = " ".join(words)
            key = fold(alias)
            if key not in self.aliases:
                self.aliases.add(key)
                return alias
        return None

    def _acronym(self, topic: tuple[int, ...]) -> str | None:
        pool = self.vocabulary.pool
        for _ in range(20):
            letters = [pool[i].ascii[0] for i in topic] + [
                self.rng.choice("abcdefghijlmnoprstuv") for _ in range(self.rng.randint(1, 3))
            ]
            acronym = "".join(letters[:4]).upper()
            if (
                len(acronym) >= 2
                and acronym.casefold() not in _YAML_SPECIAL
                and acronym.casefold() not in FUNCTION_WORDS
                and fold(acronym) not in self.aliases
            ):
                self.aliases.add(fold(acronym))
                return acronym
        return None

    # -- documents --------------------------------------------------------------------------

    def _section_counts(self) -> list[int]:
        counts: list[int] = []
        total = 0
        while total < self.spec.sections:
            if self.rng.random() < LONG_DOC_SHARE:
                count = self.rng.randint(9, 16)
            else:
                count = _pick(self.rng, _SECTIONS_T)
            count = min(count, self.spec.sections - total)
            counts.append(count)
            total += count
        return counts

    def _new_doc(self, **kwargs: Any) -> DocPlan:
        doc = DocPlan(index=len(self.docs), **kwargs)
        self.docs.append(doc)
        return doc

    def plan(self) -> list[DocPlan]:
        counts = self._section_counts()
        tenant_docs = 0
        if self.spec.tenants and len(counts) >= 10:
            tenant_docs = max(self.spec.tenants, round(len(counts) * self.spec.tenant_share))
            tenant_docs = min(tenant_docs, len(counts) // 2)
        shared_counts, tenant_counts = (
            counts[: len(counts) - tenant_docs],
            counts[len(counts) - tenant_docs :],
        )
        self._plan_shared(shared_counts)
        self._plan_tenants(tenant_counts)
        for doc in self.docs:
            self._plan_attributes(doc)
        self._plan_probes()
        return self.docs

    def _plan_shared(self, counts: list[int]) -> None:
        # the first modules with room get a versioned rule, so small corpora have temporal queries
        self.min_pairs = min(QUERY_COUNTS["temporal"], len(counts) // 30)
        slots = iter(counts)
        area = ""
        modules_in_area = 0
        pending = len(counts)
        while pending > 0:
            size = max(1, round(math.exp(self.rng.gauss(MODULE_SIZE_LOG_MEAN, MODULE_SIZE_LOG_SD))))
            size = min(size, pending, 80)
            root_id, topic = self._segment("")
            if modules_in_area % MODULES_PER_AREA == 0:
                area = _kebab(root_id)
            modules_in_area += 1
            first = len(self.docs)
            root = self._new_doc(
                semantic_id=root_id, path=f"{area}/{_id_path(root_id)}.md", tenant="*",
                module=first, parent=None, depth=1, sections=next(slots), topic=topic,
            )  # fmt: skip
            self.module_roots.append(root.index)
            made = 1
            while made < size:
                weights = [PARENT_WEIGHT_BY_DEPTH.get(d.depth, 0.0) for d in self.docs[first:]]
                parent = self.docs[first + self._choose(weights)]
                child_id, topic = self._segment(parent.semantic_id)
                wanted = self.rng.random() < VERSIONED_SHARE or self.pairs < self.min_pairs
                versioned = size - made >= 2 and wanted
                self.pairs += versioned
                for version in (1, 2) if versioned else (0,):
                    suffix = f"-v{version}" if version else ""
                    self._new_doc(
                        semantic_id=child_id, path=f"{area}/{_id_path(child_id)}{suffix}.md",
                        tenant="*", module=first, parent=parent.index, depth=parent.depth + 1,
                        sections=next(slots), topic=topic, versioned=version,
                    )  # fmt: skip
                    made += 1
            self.module_range[first] = range(first, len(self.docs))
            pending -= size

    def _choose(self, weights: Sequence[float]) -> int:
        cumulative = list(itertools.accumulate(weights))
        return bisect.bisect(cumulative, self.rng.random() * cumulative[-1])

    def _plan_tenants(self, counts: list[int]) -> None:
        if not counts:
            return
        number = min(self.spec.tenants, len(counts))
        topics = []
        for _ in range(number):
            namespace, topic = self._segment("", words=2)
            self.tenants.append((_kebab(namespace), namespace))
            topics.append(topic)
        weights = [1 / (i + 1) ** 0.8 for i in range(number)]
        per_tenant = [1] * number
        for _ in range(len(counts) - number):
            per_tenant[self._choose(weights)] += 1
        shared = self.reserve() if number >= 2 else None
        slots = iter(counts)
        for (tenant, namespace), topic, amount in zip(
            self.tenants, topics, per_tenant, strict=True
        ):
            first = len(self.docs)
            root = self._new_doc(
                semantic_id=namespace, path=f"tenants/{tenant}/{_id_path(namespace)}.md",
                tenant=tenant, module=first, parent=None, depth=1, sections=next(slots),
                topic=topic,
            )  # fmt: skip
            for made in range(1, amount):
                parent = (
                    root
                    if self.rng.random() < 0.8
                    else self.docs[self.rng.randrange(first, len(self.docs))]
                )
                if parent.depth >= 3:
                    parent = root
                child_id, topic = self._segment(parent.semantic_id)
                doc = self._new_doc(
                    semantic_id=child_id, path=f"tenants/{tenant}/{_id_path(child_id)}.md",
                    tenant=tenant, module=first, parent=parent.index, depth=parent.depth + 1,
                    sections=next(slots), topic=topic,
                )  # fmt: skip
                if made == 1 and shared is not None:
                    doc.shared, doc.role = shared, "tenant_shared"
            self.tenant_docs[tenant] = range(first, len(self.docs))

    def _plan_attributes(self, doc: DocPlan) -> None:
        rng = self.rng
        doc.trust = _pick(rng, _TRUST_T)
        draw = rng.random()
        if draw < DEPRECATED_SHARE:
            doc.trust = doc.status = "deprecated"
        elif draw < DEPRECATED_SHARE + ARCHIVED_SHARE:
            doc.status = "archived"
        doc.version = rng.randint(1, 7)
        start = _day(rng, "2019-01-01", "2025-12-31")
        doc.valid_from = start if rng.random() < 0.98 else None
        draw = rng.random()
        if doc.versioned == 1:  # the first version ends the day before the second begins
            doc.version, doc.valid_from = 1, min(start, "2025-01-01")
            doc.valid_until = _day_before(VERSION_SPLIT)
        elif doc.versioned == 2:
            doc.version, doc.valid_from = 2, VERSION_SPLIT
        elif draw < EXPIRED_SHARE:
            doc.valid_until = _day(rng, "2024-01-01", "2025-12-31")
            doc.valid_from = min(doc.valid_from or "2019-01-01", doc.valid_until)
        elif draw < VALID_UNTIL_SHARE:
            doc.valid_until = _day(rng, "2027-01-01", "2030-12-31")
        elif draw < VALID_UNTIL_SHARE + FUTURE_SHARE:
            doc.valid_from = _day(rng, "2027-01-01", "2027-12-31")
        if doc.tenant == "*":
            doc.entity = rng.random() < ENTITY_SHARE
            if rng.random() < PAGE_SHARE:
                module = self.docs[doc.module]
                doc.page = module.semantic_id
                if doc.depth > 1 and rng.random() < TAB_SHARE:
                    doc.tab = doc.semantic_id.rsplit(".", 1)[-1]
        aliases: list[str] = []
        if doc.depth == 1 and doc.tenant == "*" and rng.random() < 0.6:
            acronym = self._acronym(doc.topic)
            if acronym:
                aliases.append(acronym)
        for _ in range(_pick(rng, _ALIASES_T)):
            alias = self._alias(doc.topic)
            if alias:
                aliases.append(alias)
        doc.aliases = tuple(aliases)

    def _plan_probes(self) -> None:
        """Give some documents a reserved word (their signature) and a role in the query set."""
        rng = self.rng
        shared = [d for d in self.docs if d.tenant == "*" and d.eligible and d.depth > 1]
        tenant = [d for d in self.docs if d.tenant != "*" and d.eligible and d.depth > 1]
        rng.shuffle(shared)
        rng.shuffle(tenant)
        budget = max(1, len(shared) // 6)

        def take(pool: list[DocPlan], count: int) -> list[DocPlan]:
            taken = pool[: min(count, budget)]
            del pool[: len(taken)]
            return taken

        for doc in take(shared, QUERY_COUNTS["keyword"]):
            doc.role, doc.signature = "keyword", self.reserve()
        for doc in take(shared, QUERY_COUNTS["term"]):
            doc.role, doc.planted = "term", self.reserve()
        for doc in take(shared, QUERY_COUNTS["deprecated"]):
            doc.role, doc.signature = "deprecated", self.reserve()
            doc.trust = doc.status = "deprecated"
        for doc in take(shared, QUERY_COUNTS["expired"]):
            doc.role, doc.signature = "expired", self.reserve()
            doc.valid_from, doc.valid_until = "2024-01-01", EXPIRED_UNTIL
        for doc in tenant[: QUERY_COUNTS["tenant"]]:
            doc.role, doc.signature = "tenant", self.reserve()
        for doc in self.docs:
            if doc.role == "tenant_shared":  # one per tenant, each visible on QUERY_DAY
                doc.trust, doc.status, doc.valid_until = "official", "active", None
                doc.valid_from = min(doc.valid_from or VERSION_SPLIT, VERSION_SPLIT)
        pairs = [d for d in self.docs if d.versioned == 1 and d.status == "active"]
        rng.shuffle(pairs)
        for first in pairs[: QUERY_COUNTS["temporal"]]:
            signature = self.reserve()
            for doc in (first, self.docs[first.index + 1]):
                doc.role, doc.signature = "temporal", signature
                doc.trust, doc.status = "official", "active"


def _day(rng: random.Random, start: str, end: str) -> str:
    first, last = dt.date.fromisoformat(start), dt.date.fromisoformat(end)
    return (first + dt.timedelta(days=rng.randrange((last - first).days + 1))).isoformat()


def _day_before(day: str) -> str:
    return (dt.date.fromisoformat(day) - dt.timedelta(days=1)).isoformat()


# -- rendering --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SectionPlan:
    heading: str
    level: int
    explicit: str | None  # its {#id}, or None (addressed as doc#slug)
    topic: tuple[int, ...]

    def section_id(self, doc: DocPlan) -> str:
        return self.explicit or f"{doc.semantic_id}#{slugify(self.heading) or 'section'}"


@dataclass(frozen=True)
class Fact:
    name: str
    value: str | int | float | bool
    mention: str | None  # how the body states it ("**30 dias**"), when it does


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


class Renderer:
    """Writes one document's Markdown from its plan (its own seeded draws: order-independent)."""

    def __init__(self, spec: CorpusSpec, vocabulary: Vocabulary, planner: Planner) -> None:
        self.seed = f"kr-synthetic:{spec.seed}"
        self.vocabulary = vocabulary
        self.planner = planner
        self.docs = planner.docs
        self.shared_count = sum(1 for d in self.docs if d.tenant == "*")
        self._roots = list(
            itertools.accumulate(r**-1.0 for r in range(1, len(planner.module_roots) + 1))
        )

    def _rng(self, kind: str, key: object) -> random.Random:
        return random.Random(f"{self.seed}:{kind}:{key}")

    # -- words ------------------------------------------------------------------------------

    def _form(self, rng: random.Random, index: int) -> str:
        word = self.vocabulary.pool[index]
        return word.plural if rng.random() < PLURAL_SHARE else word.singular

    def _tokens(self, rng: random.Random, count: int, topic: Sequence[int]) -> list[str]:
        vocabulary, out = self.vocabulary, []
        for _ in range(count):
            draw = rng.random()
            if draw < STOPWORD_SHARE:
                out.append(vocabulary.function_word(rng))
            elif draw < STOPWORD_SHARE + TOPIC_SHARE and topic:
                out.append(self._form(rng, rng.choice(topic)))
            else:
                out.append(self._form(rng, vocabulary.zipf_rank(rng)))
        return out

    def _phrase(self, rng: random.Random, topic: Sequence[int], words: int) -> str:
        pool = self.vocabulary.pool
        parts = [pool[topic[0]].singular]
        for index in topic[1:]:
            parts += [self.vocabulary.function_word(rng), pool[index].singular]
        while len(parts) < words:
            parts += [
                self.vocabulary.function_word(rng),
                pool[self.vocabulary.topic_word(rng)].singular,
            ]
        parts = parts[: max(words, 1)]
        if len(parts) > 1 and parts[-1] in FUNCTION_WORDS:
            parts.pop()
        return " ".join(parts)

    @staticmethod
    def _sentences(rng: random.Random, tokens: list[str], markup: bool = True) -> str:
        sentences, at = [], 0
        while at < len(tokens):
            length = rng.randint(6, 18)
            chunk = tokens[at : at + length]
            at += length
            if markup and len(chunk) > 3 and rng.random() < 0.08:
                start = rng.randrange(len(chunk) - 2)
                if not any("[[" in t or "**" in t for t in chunk[start : start + 2]):
                    chunk[start] = "**" + chunk[start]
                    chunk[start + 1] += "**"
            for i in range(1, len(chunk) - 1):
                if rng.random() < 0.06 and "[[" not in chunk[i]:
                    chunk[i] += ","
            chunk[0] = _cap(chunk[0]) if chunk[0][:1].isalpha() else chunk[0]
            sentences.append(" ".join(chunk) + ".")
        return " ".join(sentences)

    # -- document-level attributes ----------------------------------------------------------

    def title(self, doc: DocPlan) -> str:
        rng = self._rng("title", f"{doc.semantic_id}:{doc.tenant}")
        pool, reserved = self.vocabulary.pool, self.vocabulary.reserved
        special = doc.signature if doc.signature is not None else doc.shared
        phrase = self._phrase(rng, doc.topic, rng.randint(3, 6))
        if special is not None:
            phrase = f"{reserved[special].singular} {self.vocabulary.function_word(rng)} {phrase}"
        if doc.depth == 1:
            acronym = next((a for a in doc.aliases if a.isupper()), None)
            lead = acronym or _cap(" ".join(pool[i].singular for i in doc.topic))
            return f"{lead} — {phrase}"
        return _cap(phrase)

    def section_plan(self, doc: DocPlan) -> list[SectionPlan]:
        rng = self._rng("sections", doc.index)
        pool, ids = self.vocabulary.pool, self.planner.ids
        plans = [SectionPlan(self.title(doc), 1, None, doc.topic)]
        slugs = {slugify(plans[0].heading)}
        explicit_used: set[str] = set()
        facts = {f.name.casefold() for f in self.facts(doc)}
        level = 1
        for _ in range(doc.sections - 1):
            level = 3 if level == 2 and rng.random() < LEVEL3_SHARE else 2
            if level == 3 and rng.random() < LEVEL4_SHARE:
                level = 4
            for _attempt in range(20):
                topic = tuple(self.vocabulary.topic_word(rng) for _ in range(rng.choice((1, 1, 2))))
                words = [_cap(pool[topic[0]].singular)]
                if len(topic) > 1:
                    words += [self.vocabulary.function_word(rng), pool[topic[1]].singular]
                elif rng.random() < 0.5:
                    words += [
                        self.vocabulary.function_word(rng),
                        pool[rng.choice(doc.topic)].singular,
                    ]
                heading = " ".join(words)
                if slugify(heading) not in slugs:
                    break
            else:
                heading = f"{heading} {len(plans)}"
            slugs.add(slugify(heading))
            explicit = None
            if rng.random() < EXPLICIT_ID_SHARE:
                candidate = f"{doc.semantic_id}.{_camel([pool[i].ascii for i in topic])}"
                key = candidate.casefold()
                if (
                    key not in ids
                    and key not in explicit_used
                    and key.rsplit(".", 1)[1] not in facts
                ):
                    explicit = candidate
                    explicit_used.add(key)
            plans.append(SectionPlan(heading, level, explicit, topic))
        return plans

    def planted_section(self, doc: DocPlan) -> int:
        """The section (after the first) whose body holds a term probe's planted word."""
        return self._rng("planted", doc.index).randrange(1, doc.sections) if doc.sections > 1 else 0

    def facts(self, doc: DocPlan) -> list[Fact]:
        rng = self._rng("facts", doc.index)
        pool = self.vocabulary.pool
        out: list[Fact] = []
        names: set[str] = set()
        for _ in range(_pick(rng, _FACTS_T)):
            word = _cap(pool[self.vocabulary.topic_word(rng)].ascii)
            draw = rng.random()
            mention: str | None = None
            value: str | int | float | bool
            if draw < 0.6:
                suffix, unit, values = rng.choice(_NUMBER_FACTS)
                prefix = rng.choice(_NUMBER_PREFIXES)
                name = (
                    f"{prefix}{word}{suffix}" if prefix else f"{word[:1].lower()}{word[1:]}{suffix}"
                )
                value = rng.choice(values)
                if rng.random() < 0.6:
                    spaced = unit if unit in ("", "%") else f" {unit}"
                    mention = f"**{value}{spaced}**"
            elif draw < 0.8:
                name = f"{word[:1].lower()}{word[1:]}{rng.choice(_BOOL_SUFFIXES)}"
                value = rng.random() < 0.7
            elif draw < 0.95:
                name = f"{word[:1].lower()}{word[1:]}{rng.choice(_STRING_SUFFIXES)}"
                if name.endswith("Code"):
                    value = f"{word[:2].upper()}-{rng.randint(100, 9999)}"
                else:
                    value = _cap(self._phrase(rng, (self.vocabulary.topic_word(rng),), 3))
            else:
                name = f"{word[:1].lower()}{word[1:]}Limit"
                value = rng.choice((0.5, 1.5, 2.5, 0.25, 3.5))
                mention = f"**{value}**"
            if name.casefold() not in names:
                names.add(name.casefold())
                out.append(Fact(name, value, mention))
        return out

    def keywords(self, doc: DocPlan, rng: random.Random) -> list[str]:
        pool = self.vocabulary.pool
        words = [pool[i].singular for i in doc.topic]
        if doc.signature is not None:
            words.insert(0, self.vocabulary.reserved[doc.signature].singular)
        if doc.shared is not None:
            words.insert(0, self.vocabulary.reserved[doc.shared].singular)
        words += [a for a in doc.aliases if a.isupper()]
        target = rng.randint(*KEYWORDS_RANGE)
        while len(words) < target:
            if rng.random() < 0.5:
                words.append(pool[self.vocabulary.topic_word(rng)].singular)
            else:
                words.append(self._phrase(rng, (self.vocabulary.topic_word(rng),), 3))
        return list(dict.fromkeys(words))

    # -- links ------------------------------------------------------------------------------

    def _link(self, doc: DocPlan, rng: random.Random) -> str:
        planner = self.planner
        candidate = doc.index
        for _ in range(6):
            draw = rng.random()
            if doc.tenant != "*" and draw < 0.5:
                candidate = rng.choice(planner.tenant_docs[doc.tenant])
            elif doc.tenant == "*" and draw < 0.35:
                candidate = rng.choice(planner.module_range[doc.module])
            elif draw < 0.8:
                rank = bisect.bisect(self._roots, rng.random() * self._roots[-1])
                candidate = planner.module_roots[rank]
            else:
                candidate = rng.randrange(self.shared_count)
            if self.docs[candidate].semantic_id != doc.semantic_id:
                break
        target = self.docs[candidate]
        if target.semantic_id == doc.semantic_id:
            target = self.docs[doc.parent if doc.parent is not None else doc.index]
        target_id = target.semantic_id
        if rng.random() < LINK_TO_SECTION_SHARE:
            explicit = [s.explicit for s in self.section_plan(target) if s.explicit]
            if explicit:
                target_id = rng.choice(explicit)
        if rng.random() < 0.5:
            return f"[[{target_id}]]"
        label = " ".join(self.vocabulary.pool[i].singular for i in target.topic)
        return f"[[{target_id}|{label}]]"

    # -- the document -----------------------------------------------------------------------

    def render(self, doc: DocPlan) -> str:
        rng = self._rng("doc", doc.index)
        pool, reserved = self.vocabulary.pool, self.vocabulary.reserved
        sections = self.section_plan(doc)
        facts = self.facts(doc)
        lines = self._front_matter(doc, rng, facts, sections[0].heading)
        mentions = [f.mention for f in facts if f.mention]
        signature_at = {0, rng.randrange(1, len(sections))} if len(sections) > 1 else {0}
        planted_at = self.planted_section(doc)
        for number, section in enumerate(sections):
            count = max(
                WORDS_MIN, min(WORDS_MAX, round(math.exp(rng.gauss(WORDS_LOG_MEAN, WORDS_LOG_SD))))
            )
            topic = (*doc.topic, *section.topic)
            tokens = self._tokens(rng, count, topic)
            extras: list[str] = []
            links = _pick(rng, _LINKS_T)
            if number == 0 and doc.parent is not None:
                parent = self.docs[doc.parent]
                label = " ".join(pool[i].singular for i in parent.topic)
                extras.append(f"[[{parent.semantic_id}|{label}]]")
                links = max(0, links - 1)
            extras += [self._link(doc, rng) for _ in range(links)]
            if mentions and rng.random() < 0.5:
                extras.append(mentions.pop())
            special = doc.signature if doc.signature is not None else doc.shared
            if special is not None and number in signature_at:
                extras.append(reserved[special].singular)
            if doc.planted is not None and number == planted_at:
                extras += [reserved[doc.planted].singular] * 2
            for token in extras:
                tokens.insert(rng.randrange(len(tokens) + 1), token)
            heading = "#" * section.level + " " + section.heading
            if section.explicit:
                heading += f" {{#{section.explicit}}}"
            lines += ["", heading, "", *self._body(rng, tokens)]
        if mentions:
            lines += ["", self._sentences(rng, [*self._tokens(rng, 6, doc.topic), *mentions])]
        return "\n".join(lines) + "\n"

    def _body(self, rng: random.Random, tokens: list[str]) -> list[str]:
        items: list[str] = []
        if len(tokens) > 12 and rng.random() < LIST_SHARE:
            listed = rng.randint(2, 5)
            cut = max(6, len(tokens) - listed * rng.randint(3, 8))
            tail, tokens = tokens[cut:], tokens[:cut]
            size = max(1, len(tail) // listed)
            for at in range(0, len(tail), size):
                item = tail[at : at + size]
                item[0] = _cap(item[0]) if item[0][:1].isalpha() else item[0]
                items.append("- " + " ".join(item))
        paragraphs = [tokens]
        if len(tokens) > 24 and rng.random() < SECOND_PARAGRAPH_SHARE:
            half = len(tokens) // 2
            paragraphs = [tokens[:half], tokens[half:]]
        out: list[str] = []
        for paragraph in paragraphs:
            if out:
                out.append("")
            out.append(self._sentences(rng, paragraph))
        if items:
            out += ["", *items]
        return out

    def _front_matter(
        self, doc: DocPlan, rng: random.Random, facts: list[Fact], title: str
    ) -> list[str]:
        words = self._tokens(rng, rng.randint(10, 20), doc.topic)
        description = self._sentences(rng, words, markup=False)
        created = _day(rng, "2018-06-01", min(doc.valid_from or "2025-12-31", "2025-12-31"))
        updated = _day(rng, created, LAST_DAY)
        lines = [
            "---",
            f"semanticId: {doc.semantic_id}",
            f"title: {title}",
            f"description: {description}",
            f"keywords: [{', '.join(self.keywords(doc, rng))}]",
        ]
        if doc.aliases:
            lines.append(f"aliases: [{', '.join(doc.aliases)}]")
        lines.append('tenant: "*"' if doc.tenant == "*" else f"tenant: {doc.tenant}")
        lines.append("application: sst")
        if doc.tenant == "*":
            module = self.docs[doc.module].semantic_id
            lines.append(f"module: {module}")
            if doc.entity:
                lines.append(f"entity: {module}")
        if doc.page:
            lines.append(f"page: {doc.page}")
        if doc.tab:
            lines.append(f"tab: {doc.tab}")
        lines += [
            f"trust: {doc.trust}",
            f"status: {doc.status}",
            f"version: {doc.version}",
            f"createdAt: {created}",
            f"updatedAt: {updated}",
        ]
        if doc.valid_from:
            lines.append(f"validFrom: {doc.valid_from}")
        if doc.valid_until:
            lines.append(f"validUntil: {doc.valid_until}")
        if facts:
            lines.append("facts:")
            for fact in facts:
                lines.append(f"  {fact.name}: {_yaml_scalar(fact.value)}")
        lines.append("---")
        return lines


def _yaml_scalar(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


# -- the query set ----------------------------------------------------------------------------

RESERVED_WORDS = 160  # signatures and out-of-scope words (QUERY_COUNTS needs fewer)
SYNONYM_GROUPS = 200
EXPIRED_PAST_DAY = "2025-01-15"


def _query(
    category: str,
    query: str,
    expected: Sequence[str] = (),
    *,
    forbidden: Sequence[str] = (),
    tenant: str | None = None,
    date: str = QUERY_DAY,
    abstain: bool = False,
    expected_version: int | None = None,
    fact: str | None = None,
) -> dict[str, Any]:
    """One line of the query set, in eval/golden.jsonl's fields and order (id set later)."""
    return {
        "id": "", "query": query, "category": category, "expected": list(expected),
        "forbidden": list(forbidden), "tenant": tenant, "page": None, "tab": None, "focus": None,
        "date": date, "abstain": abstain, "intent": "knowledge",
        "expected_version": expected_version, "fact": fact,
    }  # fmt: skip


def _foreign_word(rng: random.Random) -> str:
    """A word two edits and a sound away from every corpus word: the vocabulary never uses
    k, w or y, and its sound keys never hold the clusters these syllables make ("kv", "ik")."""
    syllables = [rng.choice(("kw", "yk", "wy")) + rng.choice("aeiou") for _ in range(3)]
    return "".join(syllables) + "k"


def _near_twins(words: Sequence[Word]) -> set[str]:
    """Folded words one edit (Damerau) from another word: two such words share the word itself
    or one of its one-deletion forms."""
    owners: dict[str, set[str]] = {}
    for word in words:
        folded = fold(word.singular)
        for key in {folded, *(folded[:i] + folded[i + 1 :] for i in range(len(folded)))}:
            owners.setdefault(key, set()).add(folded)
    return {w for group in owners.values() if len(group) > 1 for w in group}


def build_queries(planner: Planner, renderer: Renderer) -> list[dict[str, Any]]:
    """Queries whose right answer is known by construction (see the module docstring)."""
    rng = random.Random(f"{renderer.seed}:queries")
    docs, reserved = planner.docs, renderer.vocabulary.reserved
    rows: list[dict[str, Any]] = []
    plain = [d for d in docs if d.tenant == "*" and d.eligible]
    sample = rng.sample(plain, min(len(plain), 4 * QUERY_COUNTS["exact_id"]))

    for doc in sample[: QUERY_COUNTS["exact_id"]]:
        rows.append(_query("exact_id", doc.semantic_id, [doc.semantic_id]))
    sections = [
        s.explicit for d in sample for s in renderer.section_plan(d)[1:2] if s.explicit is not None
    ]
    for section_id in sections[: QUERY_COUNTS["exact_section"]]:
        rows.append(_query("exact_section", section_id, [section_id]))
    aliased = [d for d in sample if d.aliases]
    for doc in aliased[: QUERY_COUNTS["alias"]]:
        rows.append(_query("alias", doc.aliases[-1], [doc.semantic_id]))
    with_facts = [(d, f) for d in sample for f in renderer.facts(d)[:1]]
    for doc, fact in with_facts[: QUERY_COUNTS["fact"]]:
        address = f"{doc.semantic_id}.{fact.name}"
        rows.append(_query("fact", address, [doc.semantic_id], fact=address))

    by_role: dict[str, list[DocPlan]] = {}
    for doc in docs:
        by_role.setdefault(doc.role, []).append(doc)
    keyword = by_role.get("keyword", [])
    for doc in keyword:
        rows.append(_query("keyword", reserved[doc.signature or 0].singular, [doc.semantic_id]))
    plural = [
        d
        for d in keyword
        if reserved[d.signature or 0].plural != reserved[d.signature or 0].singular
    ]
    for doc in plural[: QUERY_COUNTS["plural"]]:
        rows.append(_query("plural", reserved[doc.signature or 0].plural, [doc.semantic_id]))
    accented = [d for d in keyword if has_diacritics(reserved[d.signature or 0].singular)]
    for doc in accented[: QUERY_COUNTS["accent"]]:
        rows.append(
            _query("accent", fold(reserved[doc.signature or 0].singular), [doc.semantic_id])
        )
    for doc in by_role.get("term", []):
        section = renderer.section_plan(doc)[renderer.planted_section(doc)]
        text = f"{reserved[doc.planted or 0].singular} {section.heading.lower()}"
        rows.append(_query("term", text, [section.section_id(doc)]))

    tenants = [t for t, _ in planner.tenants]
    for number, doc in enumerate(by_role.get("tenant", [])):
        word = reserved[doc.signature or 0].singular
        rows.append(_query("tenant", word, [doc.semantic_id], tenant=doc.tenant))
        if number < 5:
            rows.append(_query("tenant_isolation", word, forbidden=[doc.semantic_id], abstain=True))
            others = [t for t in tenants if t != doc.tenant]
            if others:
                other = others[number % len(others)]
                rows.append(
                    _query(
                        "tenant_isolation",
                        word,
                        forbidden=[doc.semantic_id],
                        tenant=other,
                        abstain=True,
                    )
                )
    shared = by_role.get("tenant_shared", [])
    for doc in shared[: QUERY_COUNTS["tenant_shared"]]:
        forbidden = [d.semantic_id for d in shared if d.tenant != doc.tenant]
        word = reserved[doc.shared or 0].singular
        rows.append(
            _query("tenant_shared", word, [doc.semantic_id], forbidden=forbidden, tenant=doc.tenant)
        )

    for doc in by_role.get("temporal", []):
        if doc.versioned != 1:
            continue
        word = reserved[doc.signature or 0].singular
        rows.append(_query("temporal", word, [doc.semantic_id], date=PAST_DAY, expected_version=1))
        rows.append(_query("temporal", word, [doc.semantic_id], expected_version=2))
    for doc in by_role.get("expired", []):
        word = reserved[doc.signature or 0].singular
        rows.append(_query("expired", word, forbidden=[doc.semantic_id], abstain=True))
        rows.append(_query("temporal", word, [doc.semantic_id], date=EXPIRED_PAST_DAY))
    for doc in by_role.get("deprecated", []):
        word = reserved[doc.signature or 0].singular
        rows.append(_query("deprecated", word, forbidden=[doc.semantic_id], abstain=True))
    for _ in range(QUERY_COUNTS["out_of_scope"]):
        rows.append(_query("out_of_scope", f"o que é {_foreign_word(rng)}?", abstain=True))
    for number, row in enumerate(rows, start=1):
        row["id"] = f"s{number:04d}"
    return rows


def synonym_groups(planner: Planner, renderer: Renderer) -> list[list[str]]:
    """Acronym ↔ name groups of the module roots, as the sample's ``_synonyms.yml``."""
    pool = renderer.vocabulary.pool
    groups = []
    for index in planner.module_roots:
        doc = planner.docs[index]
        acronym = next((a for a in doc.aliases if a.isupper()), None)
        if acronym:
            groups.append([acronym, " de ".join(pool[i].singular for i in doc.topic)])
        if len(groups) == SYNONYM_GROUPS:
            break
    return groups


# -- the corpus -------------------------------------------------------------------------------


def generate(
    spec: CorpusSpec, out: str | Path, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Write the corpus under ``out`` (which must be empty or absent); return its summary."""
    started = time.perf_counter()
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    seed = f"kr-synthetic:{spec.seed}"
    vocabulary = Vocabulary(seed, heaps_vocabulary(spec.sections), RESERVED_WORDS)
    planner = Planner(spec, vocabulary)
    docs = planner.plan()
    renderer = Renderer(spec, vocabulary, planner)
    made: set[Path] = set()
    total_bytes = sections = 0
    step = max(1, len(docs) // 50)
    for doc in docs:
        path = root / doc.path
        if path.parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.add(path.parent)
        data = renderer.render(doc).encode("utf-8")
        path.write_bytes(data)
        total_bytes += len(data)
        sections += doc.sections
        if progress is not None and (doc.index + 1) % step == 0:
            elapsed = time.perf_counter() - started
            progress(
                f"{sections:,}/{spec.sections:,} sections, {doc.index + 1:,} files, {elapsed:.0f} s"
            )
    groups = synonym_groups(planner, renderer)
    synonyms = "# Synthetic acronym groups (bench/synthetic_corpus.py).\n"
    synonyms += "".join(f"- [{', '.join(g)}]\n" for g in groups)
    (root / "_synonyms.yml").write_text(synonyms, encoding="utf-8")
    queries = build_queries(planner, renderer)
    lines = "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries)
    (root / "_queries.jsonl").write_text(lines, encoding="utf-8")
    summary = {
        "generator": "bench/synthetic_corpus.py",
        "generator_version": GENERATOR_VERSION,
        "seed": spec.seed,
        "sections": sections,
        "documents": len(docs),
        "tenant_documents": sum(1 for d in docs if d.tenant != "*"),
        "tenants": len(planner.tenants),
        "modules": len(planner.module_roots),
        "vocabulary": len(vocabulary.pool),
        "markdown_bytes": total_bytes,
        "synonym_groups": len(groups),
        "queries": len(queries),
        "query_day": QUERY_DAY,
    }
    (root / "_corpus.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def _prepare(out: Path, force: bool) -> None:
    if not out.exists() or not any(out.iterdir()):
        return
    if not force:
        raise SystemExit(f"{out} is not empty (use --force to replace a generated corpus)")
    if not (out / "_corpus.json").is_file():
        raise SystemExit(f"{out} holds no _corpus.json: not a generated corpus, left alone")
    shutil.rmtree(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sections", type=int, required=True, help="sections to generate")
    parser.add_argument("--out", type=Path, required=True, help="folder to write (empty or new)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tenants", type=int, default=20, help="tenants owning documents")
    parser.add_argument(
        "--tenant-share", type=float, default=TENANT_SHARE, help="share of tenant-only documents"
    )
    parser.add_argument(
        "--force", action="store_true", help="replace a previously generated corpus"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)
    try:
        spec = CorpusSpec(args.sections, args.seed, args.tenants, args.tenant_share)
    except ValueError as exc:
        parser.error(str(exc))
    _prepare(args.out, args.force)
    started = time.perf_counter()

    def progress(line: str) -> None:
        print(f"\r{line}", end="", file=sys.stderr, flush=True)

    summary = generate(spec, args.out, None if args.quiet else progress)
    if not args.quiet:
        print(file=sys.stderr)
    elapsed = time.perf_counter() - started
    print(json.dumps({**summary, "seconds": round(elapsed, 1)}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
