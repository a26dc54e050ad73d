"""Incremental builds and delta publishes against full ones, on a synthetic knowledge base.

    python bench/incremental.py --source /work/synthetic/100k [--embedder hash|none] [--out F]

What it does, in one process, on a copy of ``--source`` (a knowledge folder, e.g. one made by
bench/synthetic_corpus.py; never modified) and a fresh local state (folder = R2, SQLite = D1 and
KV, the embedded defaults):

- a first full build, published and activated: the baseline, which also fills the state's
  document cache (``<state>/build/documents.sqlite``) and the vector cache;
- then three changes, each followed by an incremental build (``build_knowledge(reuse=the
  document cache)``, what ``kr build`` does) and a publish into the same state, and by a full
  build of the same folder (no reuse) for comparison: one edited document, ten edited
  documents, one added and one removed document;
- per change: build seconds (parse / the rest), publish seconds, files and bytes the publish
  uploaded (from its report) and the bytes of the package that differ from the previous
  version's (content-named files new to the store, plus the resident files), D1 rows written,
  vector records upserted; the package's size; whether the incremental package is the full
  build's, byte for byte (same version id: the id is a hash over every artifact).

Writes ``bench/incremental.json`` (``--out``) and prints a table; the figures and what they
mean: bench/README.md, "Incremental builds".
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kr.document_cache import DocumentCache
from router.adapters.local.embedders import embedder_by_name
from router.adapters.local.state import LocalState
from router.compile.build import BuildResult, build_knowledge
from router.compile.corpus import knowledge_files
from router.ops.publish import MemoryJournal, PublishReport, PublishTarget, catalog_rows, publish
from router.ops.publish import package_catalog as catalog_of
from router.package.manifest import MANIFEST_NAME

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "incremental.json"
EDIT = "\n\nNota de revisão {n}: inspecionar o talabarte e o trava-quedas antes de cada uso.\n"


@dataclass
class Built:
    result: BuildResult
    files: dict[str, bytes]
    seconds: float
    parse_seconds: float
    parsed: int
    reused: int


def timed_build(folder: Path, embedder: str, state: Path | None) -> Built:
    """``build_knowledge`` with (``state``) or without the document cache of ``state``."""
    cache = DocumentCache(state) if state is not None else None
    phases: dict[str, float] = {}

    def phase(name: str, total: int) -> Any:
        phases.setdefault(name, time.perf_counter())
        return lambda n: None

    started = time.perf_counter()
    result = build_knowledge(folder, encoder=embedder_by_name(embedder), phases=phase, reuse=cache)
    seconds = time.perf_counter() - started
    files = result.package.files()
    parse_s = next((v for k, v in phases.items() if k != "parse"), time.perf_counter()) - started
    parsed = reused = len(result.corpus.documents)
    if cache is not None:
        cache.keep(doc.path for doc in result.corpus.documents)
        cache.close()
        parsed, reused = cache.misses, cache.hits
    return Built(result, files, seconds, parse_s, parsed, reused)


async def timed_publish(files: dict[str, bytes], state: LocalState) -> tuple[PublishReport, float]:
    # The local state has no vector index (the local service embeds in process), so the vectors
    # a Vectorize publish would upsert are what the report counts as skipped.
    target = PublishTarget(
        name=str(state.root), blobs=state.blobs, kv=state.kv, relational=state.relational
    )
    started = time.perf_counter()
    report = await publish(files, target, MemoryJournal())
    return report, time.perf_counter() - started


def changed_bytes(files: dict[str, bytes], previous: dict[str, bytes]) -> tuple[int, int]:
    """(files, bytes) of ``files`` that ``previous`` does not hold with the same content."""
    new = [name for name, blob in files.items() if previous.get(name) != blob]
    return len(new), sum(len(files[name]) for name in new)


def kind_of(name: str) -> str:
    """A file's kind: the stem of a content-named file (``s``, ``texts``…), else its name
    without the partition prefix (``partition.bin``, ``manifest.json``)."""
    found = re.search(r"\.(\w+)-[0-9a-f]{16}\.bin$", name)
    return found.group(1) if found else name.split(".", 1)[-1]


def differing_by_kind(files: dict[str, bytes], previous: dict[str, bytes]) -> dict[str, list[int]]:
    """kind → [files differing, bytes differing, bytes in all] of the new package."""
    kinds: dict[str, list[int]] = {}
    for name, blob in files.items():
        row = kinds.setdefault(kind_of(name), [0, 0, 0])
        row[2] += len(blob)
        if previous.get(name) != blob:
            row[0] += 1
            row[1] += len(blob)
    return dict(sorted(kinds.items(), key=lambda item: -item[1][1]))


def rows_written(files: dict[str, bytes]) -> int:
    from router.package.manifest import Manifest

    manifest = Manifest.from_bytes(files[MANIFEST_NAME])
    return sum(len(rows) for rows in catalog_rows(catalog_of(files, manifest)).values())


def edit_documents(folder: Path, count: int, rng: random.Random) -> list[str]:
    paths = rng.sample(knowledge_files(folder), count)
    for n, relative in enumerate(paths):
        path = folder / relative
        path.write_text(path.read_text("utf-8") + EDIT.format(n=n), "utf-8")
    return paths


def add_and_remove(folder: Path, rng: random.Random) -> list[str]:
    removed = rng.choice(knowledge_files(folder))
    (folder / removed).unlink()
    added = "bench-added-note.md"
    (folder / added).write_text(
        "---\nsemanticId: bench.addedNote\ntitle: Nota adicionada\n---\n\n# Nota adicionada\n\n"
        "Procedimento novo de resgate em altura com tripé e guincho.\n",
        "utf-8",
    )
    return [removed, added]


def report_row(
    change: str, built: Built, full: Built, published: PublishReport, publish_s: float,
    previous: dict[str, bytes],
) -> dict[str, Any]:  # fmt: skip
    package_bytes = sum(len(blob) for blob in built.files.values())
    files_new, bytes_new = changed_bytes(built.files, previous)
    uploaded = getattr(published, "bytes_uploaded", None)
    return {
        "change": change,
        "documents": len(built.result.corpus.documents),
        "sections": built.result.package.manifest.counts["sections"],
        "package_files": len(built.files),
        "package_bytes": package_bytes,
        "incremental": {
            "build_s": round(built.seconds, 2),
            "parse_s": round(built.parse_seconds, 2),
            "parsed": built.parsed,
            "reused": built.reused,
            "publish_s": round(publish_s, 2),
            "blobs_uploaded": getattr(published, "blobs_uploaded", None),
            "bytes_uploaded": uploaded,
            "files_differing": files_new,
            "bytes_differing": bytes_new,
            "d1_rows_written": rows_written(built.files),
            "vectors_upserted": published.vectors_upserted + published.vectors_skipped,
            "differing_by_kind": differing_by_kind(built.files, previous),
        },
        "full": {
            "build_s": round(full.seconds, 2),
            "parse_s": round(full.parse_seconds, 2),
            "bytes": package_bytes,
            "d1_rows_written": rows_written(full.files),
            "vectors_upserted": full.result.package.manifest.counts["sections"]
            if full.result.package.manifest.embedding
            else 0,
        },
        "same_as_full": None
        if full is built
        else built.result.package.knowledge_version == full.result.package.knowledge_version,
        "version": built.result.package.knowledge_version,
    }


async def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    folder = work / "knowledge"
    shutil.copytree(args.source, folder)
    state_root = work / "state"
    state = LocalState(state_root)
    rng = random.Random(args.seed)
    first = timed_build(folder, args.embedder, state_root)
    published, publish_s = await timed_publish(first.files, state)
    rows: list[dict[str, Any]] = [report_row("first build", first, first, published, publish_s, {})]
    previous = first.files
    changes = [
        ("1 document edited", lambda: edit_documents(folder, 1, rng)),
        ("10 documents edited", lambda: edit_documents(folder, 10, rng)),
        ("1 added, 1 removed", lambda: add_and_remove(folder, rng)),
    ]
    for name, change in changes[: args.changes]:
        change()
        built = timed_build(folder, args.embedder, state_root)
        published, publish_s = await timed_publish(built.files, state)
        full = built if args.no_full else timed_build(folder, args.embedder, None)
        rows.append(report_row(name, built, full, published, publish_s, previous))
        previous = built.files
        print(json.dumps(rows[-1]), flush=True)
    return {"conditions": conditions(args), "rows": rows}


def conditions(args: argparse.Namespace) -> dict[str, Any]:
    def git(*argv: str) -> str:
        done = subprocess.run(["git", *argv], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip()

    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "commit": git("rev-parse", "--short", "HEAD"),
        "dirty": bool(git("status", "--porcelain")),
        "python": platform.python_version(),
        "source": str(args.source),
        "embedder": args.embedder,
        "seed": args.seed,
    }


def print_table(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Incremental build + delta publish vs full rebuild")
    for column in ("change", "sections", "package MB", "build s inc / full", "parse s inc / full",
                   "parsed / reused", "publish s", "uploaded MB (files)", "differing MB (files)",
                   "D1 rows", "vectors", "= full"):  # fmt: skip
        table.add_column(column, justify="left" if column == "change" else "right")
    for row in report["rows"]:
        inc, full = row["incremental"], row["full"]
        uploaded = inc["bytes_uploaded"]
        table.add_row(
            row["change"], f"{row['sections']:,}", f"{row['package_bytes'] / 1e6:.1f}",
            f"{inc['build_s']:.1f} / {full['build_s']:.1f}",
            f"{inc['parse_s']:.1f} / {full['parse_s']:.1f}",
            f"{inc['parsed']:,} / {inc['reused']:,}", f"{inc['publish_s']:.1f}",
            "—" if uploaded is None else f"{uploaded / 1e6:.2f} ({inc['blobs_uploaded']:,})",
            f"{inc['bytes_differing'] / 1e6:.2f} ({inc['files_differing']:,})",
            f"{inc['d1_rows_written']:,}", f"{inc['vectors_upserted']:,}",
            {True: "yes", False: "NO", None: "not built"}[row["same_as_full"]],
        )  # fmt: skip
    Console(width=220).print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--source", type=Path, required=True, help="a knowledge folder")
    parser.add_argument("--embedder", default="hash", choices=("hash", "none"))
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    parser.add_argument("--changes", type=int, default=3, help="the first N of the 3 changes")
    parser.add_argument(
        "--no-full",
        action="store_true",
        help="skip the full rebuild after each change (its columns repeat the incremental's)",
    )
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="kr-incremental-"))
    try:
        report = asyncio.run(measure(args, work))
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", "utf-8")
    print_table(report)
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
