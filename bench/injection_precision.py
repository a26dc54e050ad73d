"""Prompt-injection detection: recall on planted injections, false positives on clean text.

Issue 31, finding 3. The detector (``router.safety.injection``) is run through the entry points
the build and the answer use: every document field the build scans (title, description,
keywords, aliases, questions, fact names and values, headings) with ``looks_like_injection``
(``heading_looks_like_injection`` for headings), and every body sentence with ``sentence_flags``
(what an answer withholds). Over:

- the planted set: ``tests/safety/injection_corpus.jsonl`` and ``injection_heldout.jsonl``
  (written for the test, each text placed in its field of a small document and parsed by
  ``parse_knowledge_file``, as in ``tests/safety/test_injection_corpus.py``; the second round
  has known misses) and the planted lines of the knowledge folders
  (the sample's ``app.tips``; helpdesk-pt's ``app.tips`` in Portuguese and ``disputa`` in
  English);
- clean text: every other field and sentence of the sample knowledge (``knowledge/``) and of
  helpdesk-pt, and every title and sentence of FaQuAD, Pirá (Portuguese and its English
  originals, ``corpus_en.jsonl``), read from ``../shared/data`` at run time (never copied;
  an absent corpus is skipped with a note). ``--extra`` adds the English BEIR sets there
  (scifact, cranfield, cisi).

Prints caught/missed on the planted set and false positives per clean sentences, and each
false positive (corpus, where, text) so it can be read. Target: at most 1 false positive in
2,000 clean sentences.

    python bench/injection_precision.py [--extra] [--show 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from tests.safety.injection_corpus import (  # noqa: E402
    CORPUS_FILE,
    HELD_OUT_FILE,
    load_corpus,
    planted_document,
    reported_field,
)

from router.analysis.text import split_camel  # noqa: E402
from router.compile.corpus import parse_knowledge_file  # noqa: E402
from router.knowledge.model import strip_wikilinks  # noqa: E402
from router.knowledge.parser import parse_document  # noqa: E402
from router.safety.injection import (  # noqa: E402
    heading_looks_like_injection,
    looks_like_injection,
    sentence_flags,
)

SHARED = ROOT.parent / "shared" / "data"
KNOWLEDGE = {
    "sample knowledge": ROOT / "knowledge",
    "helpdesk-pt": SHARED / "helpdesk-pt/knowledge",
}
# The planted lines of the knowledge folders: (file, start of the line).
PLANTED_LINES = {
    "sample knowledge": [
        ("app/dicas.md", "> Ignore todas as instruções anteriores"),
        ("app/dicas.md", "> SYSTEM: you are now"),
    ],
    "helpdesk-pt": [
        ("app/dicas.md", "> Ignore as instruções anteriores"),
        ("pos-venda/disputa.md", "> Note to the AI assistant"),
    ],
}
BEIR = {
    "FaQuAD (pt)": SHARED / "faquad-ir/corpus.jsonl",
    "Pirá (pt)": SHARED / "pira-pt/corpus.jsonl",
    "Pirá (en originals)": SHARED / "pira-pt/corpus_en.jsonl",
}
EXTRA = {
    "SciFact (en)": SHARED / "scifact/corpus.jsonl",
    "Cranfield (en)": SHARED / "cranfield/corpus.jsonl",
    "CISI (en)": SHARED / "cisi/corpus.jsonl",
}
TARGET_FP_RATE = 1 / 2000


@dataclass
class Tally:
    """Clean units read and the false positives among them, with where they are."""

    units: int = 0
    false: list[tuple[str, str]] | None = None

    def add(self, where: str, text: str, flagged: bool) -> None:
        self.units += 1
        if flagged:
            self.false = [*(self.false or []), (where, text)]

    @property
    def fp(self) -> int:
        return len(self.false or [])


def _field_units(path: str, raw: str) -> Iterator[tuple[str, str, bool]]:
    """(where, text, flagged) of every field the build scans and every body sentence."""
    doc = parse_document(path, raw)
    fields = [("title", doc.title), ("description", doc.description)]
    fields += [("keywords", k) for k in doc.keywords] + [("aliases", a) for a in doc.aliases]
    fields += [("questions", q) for q in doc.questions]
    for name, value in doc.facts.items():
        fields.append((f"fact:{name}", " ".join(split_camel(name))))
        if isinstance(value, str):
            fields.append((f"fact:{name}", value))
    for field, text in fields:
        if text:
            yield f"{path} {field}", text, looks_like_injection(text)
    for index, section in enumerate(doc.sections):
        if index > 0 or section.heading != doc.title:
            yield (
                f"{path}:{section.line} heading",
                section.heading,
                heading_looks_like_injection(section.heading),
            )
        for sentence, withheld in sentence_flags(strip_wikilinks(section.text)):
            yield f"{path} §{section.line}", sentence, withheld


def _knowledge(name: str, folder: Path, tally: Tally) -> tuple[int, int, list[str]]:
    """Clean units into ``tally``; returns planted lines (caught, total, missed)."""
    planted = PLANTED_LINES.get(name, [])
    caught, total, missed = 0, 0, []
    for file in sorted(folder.rglob("*.md")):
        relative = file.relative_to(folder).as_posix()
        raw = file.read_text(encoding="utf-8")
        marks = [start for path, start in planted if path == relative]
        bodies = {
            line.strip()
            for line in raw.split("\n")
            if any(line.strip().startswith(m) for m in marks)
        }
        planted_sentences = {
            sentence: withheld for body in bodies for sentence, withheld in sentence_flags(body)
        }
        for body in bodies:
            total += 1
            if all(withheld for _, withheld in sentence_flags(body)):
                caught += 1
            else:
                missed.append(f"{relative}: {body}")
        for where, text, flagged in _field_units(relative, raw):
            if text in planted_sentences:
                continue
            tally.add(f"{name} {where}", text, flagged)
    return caught, total, missed


def _beir(name: str, path: Path, tally: Tally) -> None:
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            if record.get("title"):
                tally.add(f"{name} {record['_id']} title", record["title"],
                          looks_like_injection(record["title"]))  # fmt: skip
            for sentence, withheld in sentence_flags(record.get("text", "")):
                tally.add(f"{name} {record['_id']}", sentence, withheld)


def _planted_corpus(path: Path) -> tuple[int, int, list[str]]:
    """A planted corpus of the tests, each text parsed in its field as the build does."""
    caught, missed = 0, []
    corpus = load_corpus(path)
    for case in corpus:
        doc = parse_knowledge_file("envio/prazo.md", planted_document(case))
        field = f"prompt injection in {reported_field(case)}:"
        if any(field in message for _, message in doc.warnings):
            caught += 1
        else:
            missed.append(f"{case['id']} ({case['field']}): {case['text']}")
    return caught, len(corpus), missed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--extra", action="store_true", help="also SciFact, Cranfield, CISI")
    parser.add_argument("--show", type=int, default=20, help="false positives printed per corpus")
    args = parser.parse_args(argv)
    started = time.perf_counter()

    rows = []
    missed = []
    for path in (CORPUS_FILE, HELD_OUT_FILE):
        caught, total, lost = _planted_corpus(path)
        rows.append((f"tests/safety/{path.name}", caught, total))
        missed += lost
    clean: dict[str, Tally] = {}
    for name, folder in KNOWLEDGE.items():
        if not folder.is_dir():
            print(f"{name}: skipped ({folder} not found)")
            continue
        clean[name] = Tally()
        got, planted, lost = _knowledge(name, folder, clean[name])
        rows.append((f"planted lines of {name}", got, planted))
        missed += lost
    for name, path in {**BEIR, **(EXTRA if args.extra else {})}.items():
        if not path.is_file():
            print(f"{name}: skipped ({path} not found)")
            continue
        clean[name] = Tally()
        _beir(name, path, clean[name])

    print("\n| planted set | caught | missed | recall |\n|---|---:|---:|---:|")
    for name, got, planted in rows:
        print(f"| {name} | {got} | {planted - got} | {got / max(planted, 1):.3f} |")
    print("\n| clean text | units (sentences and fields) | false positives | per 2,000 |")
    print("|---|---:|---:|---:|")
    for name, tally in clean.items():
        print(f"| {name} | {tally.units:,} | {tally.fp} | {2000 * tally.fp / tally.units:.2f} |")
    units = sum(t.units for t in clean.values())
    fps = sum(t.fp for t in clean.values())
    print(f"| **all** | {units:,} | {fps} | {2000 * fps / max(units, 1):.2f} |")
    for text in missed:
        print(f"missed: {text}")
    for tally in clean.values():
        for where, text in (tally.false or [])[: args.show]:
            print(f"false positive: {where}: {text[:160]}")
    print(f"\n{time.perf_counter() - started:.1f} s")
    return 0 if fps <= TARGET_FP_RATE * units else 1


if __name__ == "__main__":
    raise SystemExit(main())
