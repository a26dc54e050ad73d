"""The worst request: CPU and extra peak memory of hostile questions on the sample knowledge.

Issue 12 item 4: whatever a caller sends within the API's limits (a question of at most
2,000 characters), one request must cost the router under 50 ms of CPU and 5 MB of extra
memory on the sample knowledge. The questions are hand-made shapes (one 2,000-letter token,
400 random words, accented repeats, digits, wikilink-like tokens, dotted ids, mixed scripts,
emoji, many distinct typos of corpus words…) and the worst of a seeded random search over
query shapes (``--fuzz``). Each shape is asked with fresh random content every time (a repeated
question would find its words' stems and entries in the isolate's caches, an attacker's would
not), through ``kr.local.local_service`` (the state ``kr build`` makes: sample knowledge, e5
vectors by default, no query cache), after the golden questions warmed the isolate.

Per shape: CPU ms of the process, every thread included (``time.process_time``: min, median and
max of ``--repeat`` fresh questions, without tracemalloc), the embedder's share of it, the
router's own time (``metadata.latency_ms``: wall, the embedder included), extra peak
memory (tracemalloc in a separate pass: the peak above what was allocated before the request;
Python and numpy allocations, not the e5 engine's own C buffers), what the trace says was cut
(stages' ``truncated``/``budget_exceeded`` flags, stages skipped for the budget) and the answer.

    python bench/worst_request.py [--repeat 5] [--fuzz 200] [--seed 1] [--embedder e5|hash|none]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import statistics
import string
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kr.golden import DEFAULT_GOLDEN, load_golden
from kr.local import local_service
from router.adapters.local.embedders import embedder_by_name
from router.adapters.local.state import LocalState
from router.analysis.analyzer import Analyzer
from router.analysis.text import fold
from router.compile.build import build_knowledge
from router.contract import MAX_QUERY_CHARS, QueryRequest, QueryResponse
from router.ops.publish import publish_package
from router.service import KnowledgeService

ROOT = Path(__file__).resolve().parents[1]
TODAY = "2026-06-15"
TARGET_CPU_MS = 50.0
TARGET_EXTRA_MIB = 5.0

Shape = Callable[[random.Random], str]
"""A hostile question's shape: fresh content from the generator each time it is asked."""

_LETTERS = string.ascii_lowercase
_ACCENTED = "áàâãéêíóôõúüçÁÉÍÓÚÇ"
_CYRILLIC = "абвгдежзийклмнопрстуфхцчшщыэюя"
_GREEK = "αβγδεζηθικλμνξοπρστυφχψω"
_CJK = "".join(chr(c) for c in range(0x4E00, 0x4E00 + 400))
_ARABIC = "ابتثجحخدذرزسشصضطظعغفقكلمنهوي"
_EMOJI = "😀😃😄😁😆😅🤣😂🙂🙃😉😊😇🥰😍🤩😘😗☺😚😙🥲😋😛😜🤪😝🤑🤗🤭🤫🤔🤐🤨😐😑😶🔥💧⚠️🚧👷🦺"


def _word(rng: random.Random, alphabet: str, low: int, high: int) -> str:
    return "".join(rng.choices(alphabet, k=rng.randint(low, high)))


def _fill(rng: random.Random, piece: Callable[[random.Random], str], sep: str = " ") -> str:
    """Pieces joined by ``sep`` up to the API's limit of characters."""
    parts: list[str] = []
    size = 0
    while size < MAX_QUERY_CHARS:
        part = piece(rng)
        parts.append(part)
        size += len(part) + len(sep)
    return sep.join(parts)[:MAX_QUERY_CHARS].strip() or "x"


def _repeat(word: str) -> str:
    """One word up to the API's limit of characters."""
    return " ".join([word] * (MAX_QUERY_CHARS // (len(word) + 1)))


class Corpus:
    """Words of the sample knowledge, for questions of real (and misspelled) words."""

    def __init__(self, words: list[str]) -> None:
        self.words = [w for w in words if len(w) >= 5 and w.isalpha()]
        self.alphabet = sorted({ch for w in self.words for ch in fold(w)})

    def typo(self, rng: random.Random) -> str:
        """A corpus word with one random edit (the typo repair's work)."""
        word = rng.choice(self.words)
        i = rng.randrange(len(word))
        ch = rng.choice(self.alphabet)
        edit = rng.randrange(4)
        if edit == 0:
            return word[:i] + word[i + 1 :]
        if edit == 1 and i + 1 < len(word):
            return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
        if edit == 2:
            return word[:i] + ch + word[i + 1 :]
        return word[:i] + ch + word[i:]


def hand_shapes(corpus: Corpus) -> dict[str, Shape]:
    """The hostile questions found by hand."""
    real = corpus.words
    return {
        "token 2,000 letters": lambda r: _word(r, _LETTERS, MAX_QUERY_CHARS, MAX_QUERY_CHARS),
        "400 random words": lambda r: " ".join(_word(r, _LETTERS, 4, 4) for _ in range(400)),
        "random words 5-12": lambda r: _fill(r, lambda q: _word(q, _LETTERS, 5, 12)),
        "accented repeats": lambda r: (r.choice(["ção", "ões", "ãe", "ü"]) * 700)[:MAX_QUERY_CHARS],
        "accented words": lambda r: _fill(r, lambda q: _word(q, _LETTERS + _ACCENTED, 5, 10)),
        "digits 2,000": lambda r: _word(r, string.digits, MAX_QUERY_CHARS, MAX_QUERY_CHARS),
        "numbers": lambda r: _fill(r, lambda q: _word(q, string.digits, 1, 8)),
        "wikilinks": lambda r: _fill(
            r, lambda q: f"[[{_word(q, _LETTERS, 3, 8)}.{_word(q, _LETTERS, 3, 8)}]]"
        ),
        "dotted id 2,000": lambda r: ".".join(_word(r, _LETTERS, 1, 3) for _ in range(700))[
            :MAX_QUERY_CHARS
        ],
        "ids with dots": lambda r: _fill(
            r, lambda q: ".".join(_word(q, _LETTERS, 2, 6) for _ in range(q.randint(2, 5)))
        ),
        "hyphen codes": lambda r: _fill(
            r, lambda q: f"{_word(q, _LETTERS, 2, 4)}-{_word(q, string.digits, 1, 5)}"
        ),
        "camelCase 2,000": lambda r: "".join(
            _word(r, _LETTERS, 1, 3).capitalize() for _ in range(700)
        )[:MAX_QUERY_CHARS],
        "mixed scripts": lambda r: _fill(
            r,
            lambda q: _word(q, q.choice([_LETTERS, _CYRILLIC, _GREEK, _ARABIC, _CJK]), 2, 9),
        ),
        "CJK 2,000": lambda r: _word(r, _CJK, MAX_QUERY_CHARS, MAX_QUERY_CHARS),
        "emoji": lambda r: "".join(r.choices(_EMOJI, k=1000))[:MAX_QUERY_CHARS],
        "emoji words": lambda r: _fill(r, lambda q: "".join(q.choices(_EMOJI, k=3))),
        "combining marks": lambda r: ("a\u0301\u0327" * 700)[:MAX_QUERY_CHARS],
        "many distinct typos": lambda r: _fill(r, corpus.typo),
        "corpus words": lambda r: _fill(r, lambda q: q.choice(real)),
        "one corpus word repeated": lambda r: _repeat(r.choice(real)),
        "typos + real words": lambda r: _fill(
            r, lambda q: corpus.typo(q) if q.random() < 0.5 else q.choice(real)
        ),
        # issue 31, finding 8: questions of 60 words (bench/load.py's random_words_60 and
        # typo_words_60), and 60 with a repairable share of real words
        "60 random words": lambda r: " ".join(_word(r, _LETTERS, 3, 8) for _ in range(60)),
        "60 misspelt words": lambda r: " ".join(corpus.typo(r) for _ in range(60)),
        "60 words, half misspelt": lambda r: " ".join(
            corpus.typo(r) if r.random() < 0.5 else r.choice(real) for _ in range(60)
        ),
    }


def fuzz_shape(rng: random.Random, corpus: Corpus) -> tuple[str, Shape]:
    """A random shape: a mix of piece kinds, lengths and separators (its name says which)."""
    kinds: dict[str, Callable[[random.Random], str]] = {
        "ascii": lambda q: _word(q, _LETTERS, 1, 40),
        "accented": lambda q: _word(q, _LETTERS + _ACCENTED, 1, 20),
        "digits": lambda q: _word(q, string.digits, 1, 12),
        "cjk": lambda q: _word(q, _CJK, 1, 30),
        "cyrillic": lambda q: _word(q, _CYRILLIC, 1, 12),
        "emoji": lambda q: "".join(q.choices(_EMOJI, k=q.randint(1, 4))),
        "real": lambda q: q.choice(corpus.words),
        "typo": corpus.typo,
        "id": lambda q: ".".join(_word(q, _LETTERS, 1, 8) for _ in range(q.randint(2, 6))),
        "camel": lambda q: "".join(_word(q, _LETTERS, 1, 5).capitalize() for _ in range(5)),
        "link": lambda q: f"[[{_word(q, _LETTERS, 2, 10)}#{_word(q, _LETTERS, 2, 10)}]]",
        "long": lambda q: _word(q, _LETTERS, 40, 400),
    }
    chosen = rng.sample(sorted(kinds), rng.randint(1, 4))
    sep = rng.choice([" ", " ", "  ", "-", ".", ",", "", "/"])
    length = rng.choice([50, 200, 800, MAX_QUERY_CHARS])

    def shape(r: random.Random) -> str:
        text = _fill(r, lambda q: kinds[q.choice(chosen)](q), sep)[:length].strip()
        return text or "x"

    return f"fuzz {'+'.join(chosen)} sep={sep!r} ≤{length}", shape


class TimedEmbedder:
    """The service's embedder, with the CPU of its last call (the share of a request it took)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.model_id, self.dimensions = inner, inner.model_id, inner.dimensions
        self.last_ms = 0.0

    async def embed(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        started = time.process_time()
        rows: list[list[float]] = await self.inner.embed(texts, kind)
        self.last_ms += (time.process_time() - started) * 1000
        return rows


@dataclass
class Measured:
    name: str
    cpu_ms: list[float]
    extra_mib: float = 0.0
    cut: str = ""
    answer: str = ""
    embedder_ms: list[float] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)  # metadata.latency_ms (wall)

    @property
    def cpu_min(self) -> float:
        return min(self.cpu_ms)

    @property
    def cpu_p50(self) -> float:
        return statistics.median(self.cpu_ms)

    @property
    def cpu_max(self) -> float:
        return max(self.cpu_ms)

    @property
    def embedder_p50(self) -> float:
        return statistics.median(self.embedder_ms) if self.embedder_ms else 0.0

    @property
    def router_ms(self) -> list[float]:
        """CPU outside the embedder: what the isolate pays where questions are embedded by a
        service (the Worker: Workers AI, whose time is a subrequest's wait, not the isolate's
        CPU)."""
        spent = self.embedder_ms or [0.0] * len(self.cpu_ms)
        return [max(0.0, cpu - embedded) for cpu, embedded in zip(self.cpu_ms, spent, strict=True)]

    @property
    def router_max(self) -> float:
        return max(self.router_ms)


class Bench:
    """One local service on a temporary state, and one event loop to ask it on."""

    def __init__(self, embedder: str) -> None:
        self.folder = tempfile.TemporaryDirectory(prefix="kr-worst-")
        built = build_knowledge(ROOT / "knowledge", encoder=embedder_by_name(embedder))
        local = LocalState(Path(self.folder.name))
        self.loop = asyncio.new_event_loop()
        files = built.package.files()
        self.loop.run_until_complete(
            publish_package(files, local.blobs, local.kv, local.relational)
        )
        self.service: KnowledgeService = local_service(Path(self.folder.name), cache=False)
        texts = [section.text for doc in built.corpus.documents for section in doc.sections]
        words = Analyzer().vocabulary_words(texts)
        self.corpus = Corpus(sorted(words))

    def ask(self, query: str) -> QueryResponse:
        return self.loop.run_until_complete(
            self.service.query(QueryRequest(query=query), today=TODAY, record=False)
        )

    def warm(self, shapes: dict[str, Shape]) -> None:
        """The golden questions and one question of each shape: every lazy load done; then
        the loaded package's embedder is timed."""
        for golden in load_golden(ROOT / DEFAULT_GOLDEN):
            self.ask(golden.request.query)
        rng = random.Random(0)
        for shape in shapes.values():
            self.ask(shape(rng))
        if self.service.embedder is not None:
            self.embedder = TimedEmbedder(self.service.embedder)
            self.service.embedder = self.embedder

    embedder: TimedEmbedder | None = None

    def cpu_ms(self, query: str) -> tuple[float, QueryResponse]:
        gc.collect()
        if self.embedder is not None:
            self.embedder.last_ms = 0.0
        started = time.process_time()
        response = self.ask(query)
        return (time.process_time() - started) * 1000, response

    def last_embedder_ms(self) -> float:
        return self.embedder.last_ms if self.embedder is not None else 0.0

    def extra_mib(self, query: str) -> float:
        """Peak memory the request allocated above what was allocated before it."""
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        self.ask(query)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return (peak - before) / 2**20

    def measure(self, name: str, shape: Shape, repeat: int, seed: int) -> Measured:
        rng = random.Random(seed)
        cpu, embedder, response = [], [], None
        latency = []
        for _ in range(repeat):
            ms, response = self.cpu_ms(shape(rng))
            cpu.append(ms)
            embedder.append(self.last_embedder_ms())
            latency.append(response.metadata.latency_ms)
        assert response is not None
        memory = max(self.extra_mib(shape(rng)) for _ in range(max(1, repeat // 2)))
        cut, answer = _cut(response), response.strategy_used
        return Measured(name, cpu, memory, cut, answer, embedder, latency)


def _cut(response: QueryResponse) -> str:
    """What the trace says was cut short: stages flagged truncated, or skipped for the budget."""
    cut = []
    for name, stage in response.trace.get("stages", {}).items():
        if stage.get("truncated") or stage.get("budget_exceeded"):
            cut.append(name)
        elif "budget" in str(stage.get("skipped", "")):
            cut.append(f"{name} skipped")
    if response.metadata.budget_exceeded:
        cut.append("budget")
    return ", ".join(dict.fromkeys(cut))


def fuzz(bench: Bench, count: int, seed: int, keep: int) -> dict[str, Shape]:
    """A random search over shapes: each asked once, the ``keep`` costliest returned."""
    rng = random.Random(seed)
    found: list[tuple[float, str, Shape]] = []
    for i in range(count):
        name, shape = fuzz_shape(rng, bench.corpus)
        ms, _ = bench.cpu_ms(shape(random.Random(seed * 1_000_003 + i)))
        found.append((ms, f"{name} #{i}", shape))
    found.sort(key=lambda item: -item[0])
    return {name: shape for _, name, shape in found[:keep]}


def table(rows: list[Measured]) -> str:
    lines = [
        "| request | CPU ms min | p50 | max | of which embedder p50 | router CPU ms p50 (max) "
        "| router time ms p50 (max) | extra peak MiB | cut short (trace) | answer |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row.name} | {row.cpu_min:.1f} | {row.cpu_p50:.1f} | {row.cpu_max:.1f} "
            f"| {row.embedder_p50:.1f} "
            f"| {statistics.median(row.router_ms):.1f} ({row.router_max:.1f}) "
            f"| {_p50_max(row.latency_ms)} | {row.extra_mib:.2f} "
            f"| {row.cut or '—'} | {row.answer or '—'} |"
        )
    return "\n".join(lines)


def _p50_max(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({max(values):.1f})" if values else "—"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="fresh questions per shape")
    parser.add_argument("--fuzz", type=int, default=200, help="random shapes searched")
    parser.add_argument("--keep", type=int, default=5, help="worst fuzzed shapes reported")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--embedder", default="e5", choices=("e5", "hash", "none"))
    args = parser.parse_args(argv)

    print(
        f"sample knowledge, embedder {args.embedder}, CPython {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
        f"{args.repeat} fresh questions a shape, {args.fuzz} fuzzed shapes\n"
    )
    bench = Bench(args.embedder)
    shapes = hand_shapes(bench.corpus)
    bench.warm(shapes)
    golden = [g.request.query for g in load_golden(ROOT / DEFAULT_GOLDEN)]
    baseline = Measured("golden questions (for scale)", [])
    for query in golden:
        ms, response = bench.cpu_ms(query)
        baseline.cpu_ms.append(ms)
        baseline.embedder_ms.append(bench.last_embedder_ms())
        baseline.latency_ms.append(response.metadata.latency_ms)
    found = fuzz(bench, args.fuzz, args.seed, args.keep) if args.fuzz else {}
    rows = [baseline]
    for i, (name, shape) in enumerate({**shapes, **found}.items()):
        rows.append(bench.measure(name, shape, args.repeat, args.seed + i))
    hostile = rows[1:]
    worst_cpu = max(hostile, key=lambda row: row.cpu_max)
    worst_memory = max(hostile, key=lambda row: row.extra_mib)
    worst_router = max(hostile, key=lambda row: row.router_max)
    worst_time = max(hostile, key=lambda row: max(row.latency_ms))
    print(table(rows))
    print(
        f"\nworst CPU: {worst_cpu.cpu_max:.1f} ms ({worst_cpu.name}; target < {TARGET_CPU_MS:.0f})"
        f"\nworst CPU outside the embedder: {worst_router.router_max:.1f} ms ({worst_router.name})"
        f"\nworst router time: {max(worst_time.latency_ms):.1f} ms ({worst_time.name})"
        f"\nworst extra memory: {worst_memory.extra_mib:.2f} MiB ({worst_memory.name}; "
        f"target < {TARGET_EXTRA_MIB:.0f})"
    )
    ok = worst_cpu.cpu_max < TARGET_CPU_MS and worst_memory.extra_mib < TARGET_EXTRA_MIB
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
