"""Incremental builds and delta publishes against full ones, on a synthetic knowledge base.

    python bench/incremental.py --source /work/synthetic/100k [--embedder hash|none] [--out F]

What it does, in one process, on a copy of ``--source`` (a knowledge folder, e.g. one made by
bench/synthetic_corpus.py; never modified) and a fresh local state (folder = R2, SQLite = D1 and
KV, the embedded defaults):

- a first full build, published: the baseline, which also fills the state's document cache
  and records the base an incremental build compiles against (``<state>/build/base.sqlite``,
  kr/build_base.py; its seconds are reported apart);
- then three changes, each followed by what ``kr build`` does between full builds — the delta
  build (kr/incremental.py: scan, parse the changed files, compile delta partitions against
  the base, docs/adr/0020) and its publish into the same state — and by a full build of the
  same folder for comparison: one edited document, ten edited documents, one added and one
  removed document;
- per change: delta build seconds (of which the scan), publish seconds, files and bytes the
  publish uploaded and reused, and the base's files it left alone (its report), D1 rows and
  vector records written; the full
  build's seconds and rows; and whether the answers are the full build's: over the corpus's
  own query set (``_queries.jsonl``, answers known by construction), the share of queries
  with the same first result and the same top-10 set, and hit@1 of each.

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
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kr.build_base import BuildBase
from kr.commands.build import base_reader, base_sizer
from kr.document_cache import DocumentCache
from kr.golden import load_golden
from kr.incremental import DeltaBuild, PackageFiles, build_fingerprint, scan_changes, try_delta
from kr.packages import stored_package_files
from router.adapters.local.embedders import embedder_by_name
from router.adapters.local.state import LocalState
from router.compile.build import BuildResult, build_knowledge
from router.compile.corpus import knowledge_files
from router.compile.indexer import BuildConfig
from router.ops.publish import MemoryJournal, PublishTarget, publish
from router.ops.publish_report import PublishReport
from router.ops.publish_rows import catalog_rows
from router.ops.publish_rows import package_catalog as catalog_of
from router.package.reader import load_package
from router.package.version.manifest import MANIFEST_NAME, Manifest
from router.pipeline import run_query
from router.ports import ACTIVE_VERSION_KEY

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "incremental.json"
TODAY = "2026-06-15"
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


async def timed_publish(
    files: Mapping[str, bytes], state: LocalState
) -> tuple[PublishReport, float]:
    # The local state has no vector index (the local service embeds in process), so the vectors
    # a Vectorize publish would upsert are what the report counts as skipped.
    target = PublishTarget(
        name=str(state.root), blobs=state.blobs, kv=state.kv, relational=state.relational
    )
    started = time.perf_counter()
    report = await publish(files, target, MemoryJournal())
    return report, time.perf_counter() - started


@dataclass
class Delta:
    build: DeltaBuild
    files: PackageFiles
    seconds: float
    scan_seconds: float


def timed_delta(folder: Path, embedder: str, state: LocalState, base: BuildBase) -> Delta:
    """What ``kr build`` does between full builds: scan, parse what changed, compile deltas."""
    config = BuildConfig()
    cache = DocumentCache(state.root)
    started = time.perf_counter()
    scanned = scan_changes(folder, base.files())
    scan_s = time.perf_counter() - started
    found = try_delta(
        folder,
        base,
        base_reader(state, base.version),
        config=config,
        fingerprint=build_fingerprint(folder, config, embedder),
        encoder=embedder_by_name(embedder),
        reuse=cache,
    )
    seconds = time.perf_counter() - started - scan_s  # try_delta scans again: counted once
    cache.close()
    if not isinstance(found, DeltaBuild):
        raise SystemExit(f"the change needs a full build: {found}")
    assert found.scan.changed.keys() == scanned.changed.keys()
    files = PackageFiles(
        found.package.files(),
        found.base_manifest,
        base_reader(state, base.version),
        base_sizer(state, base.version),
    )
    return Delta(found, files, seconds, scan_s)


def rows_written(files: Mapping[str, bytes]) -> int:
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


def same_answers(
    delta: Mapping[str, bytes], full: Mapping[str, bytes], queries: Path, limit: int
) -> dict[str, Any]:
    """Over the corpus's query set: the share of queries whose first result and top-10 set are
    the full build's, and hit@1 (an expected document first) of each."""
    golden = load_golden(queries)[:limit]
    loaded = [load_package(f[MANIFEST_NAME], f.__getitem__) for f in (delta, full)]
    first = same_set = 0
    hits = [0, 0]
    for query in golden:
        tops = []
        for index, package in enumerate(loaded):
            response = run_query(package, query.request, today=TODAY)
            top = [(r.doc_id, r.section_id) for r in response.results[:10]]
            hits[index] += bool(top) and top[0][0] in query.expected
            tops.append(top)
        first += tops[0][:1] == tops[1][:1]
        same_set += set(tops[0]) == set(tops[1])
    count = max(1, len(golden))
    return {
        "queries": len(golden),
        "same_first": round(first / count, 4),
        "same_top10_set": round(same_set / count, 4),
        "hit1_delta": round(hits[0] / count, 4),
        "hit1_full": round(hits[1] / count, 4),
    }


def full_row(built: Built, published: PublishReport, publish_s: float) -> dict[str, Any]:
    return {
        "build_s": round(built.seconds, 2),
        "parse_s": round(built.parse_seconds, 2),
        "parsed": built.parsed,
        "reused": built.reused,
        "publish_s": round(publish_s, 2),
        "blobs_uploaded": published.blobs_uploaded,
        "bytes_uploaded": published.bytes_uploaded,
        "d1_rows_written": rows_written(built.files),
        "vectors": built.result.package.manifest.counts["sections"]
        if built.result.package.manifest.embedding
        else 0,
    }


async def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    started = conditions(args)  # the code that runs is the code of the start
    folder = work / "knowledge"
    shutil.copytree(args.source, folder)
    state = LocalState(work / "state")
    rng = random.Random(args.seed)
    first = timed_build(folder, args.embedder, state.root)
    base = BuildBase(state.root)
    started = time.perf_counter()
    base.record(
        folder,
        first.result.package,
        first.result.corpus.documents,
        build_fingerprint(folder, BuildConfig(), args.embedder),
    )
    record_s = time.perf_counter() - started
    published, publish_s = await timed_publish(first.files, state)
    package_bytes = sum(len(blob) for blob in first.files.values())
    rows: list[dict[str, Any]] = [
        {
            "change": "first build",
            "documents": len(first.result.corpus.documents),
            "sections": first.result.package.manifest.counts["sections"],
            "package_files": len(first.files),
            "package_bytes": package_bytes,
            "base_record_s": round(record_s, 2),
            "full": full_row(first, published, publish_s),
        }
    ]
    print(json.dumps(rows[-1]), flush=True)
    changes = [
        ("1 document edited", lambda: edit_documents(folder, 1, rng)),
        ("10 documents edited", lambda: edit_documents(folder, 10, rng)),
        ("1 added, 1 removed", lambda: add_and_remove(folder, rng)),
    ]
    queries = args.source / "_queries.jsonl"
    for name, change in changes[: args.changes]:
        change()
        delta = timed_delta(folder, args.embedder, state, base)
        published, publish_s = await timed_publish(delta.files, state)
        own = delta.build.package.artifacts
        row: dict[str, Any] = {
            "change": name,
            "version": delta.build.package.knowledge_version,
            "delta": {
                "build_s": round(delta.seconds + delta.scan_seconds, 2),
                "scan_s": round(delta.scan_seconds, 2),
                "parsed": len(delta.build.scan.changed),
                "removed": len(delta.build.scan.removed),
                "build_publish_s": round(delta.seconds + delta.scan_seconds + publish_s, 2),
                "publish_s": round(publish_s, 2),
                "blobs_uploaded": published.blobs_uploaded,
                "bytes_uploaded": published.bytes_uploaded,
                "blobs_reused": published.blobs_reused,
                "bytes_reused": published.bytes_reused,
                "base_blobs": published.base_blobs,
                "uploaded_share": round(published.bytes_uploaded / package_bytes, 5),
                "delta_files": len(own),
                "delta_bytes": sum(len(blob) for blob in own.values()),
                "d1_rows_written": rows_written(delta.files),
                "vectors": published.vectors_upserted + published.vectors_skipped,
            },
        }
        if not args.no_full:
            full = timed_build(folder, args.embedder, None)
            row["full"] = full_row(full, published, float("nan"))
            for unpublished in ("publish_s", "blobs_uploaded", "bytes_uploaded"):
                row["full"].pop(unpublished)  # the full rebuild is compared, not published
            if queries.is_file():
                row["answers"] = same_answers(delta.files, full.files, queries, args.queries)
        rows.append(row)
        print(json.dumps(rows[-1]), flush=True)
    base.close()
    return {"conditions": started, "rows": rows}


async def compare_with_full(args: argparse.Namespace) -> dict[str, Any]:
    """``--compare WORK``: the active version of a finished run's state (its last delta) against
    a full build of its folder as it is now, over the corpus's query set (at a million
    sections, one full rebuild instead of one per change)."""
    work = args.compare
    state = LocalState(work / "state")
    version = await state.kv.get(ACTIVE_VERSION_KEY)
    assert version is not None, f"no active version in {work / 'state'}"
    files = await stored_package_files(state, version)
    full = timed_build(work / "knowledge", args.embedder, None)
    answers = same_answers(files, full.files, args.source / "_queries.jsonl", args.queries)
    return {
        "conditions": conditions(args),
        "delta_version": version,
        "full_version": full.result.package.knowledge_version,
        "full_build_s": round(full.seconds, 2),
        "answers": answers,
    }


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

    table = Table(title="Delta build + publish vs full rebuild (docs/adr/0020)")
    for column in ("change", "build s delta / full", "of which scan s", "publish s",
                   "build+publish s", "uploaded MB (files)", "uploaded % of package",
                   "D1 rows delta / full", "same 1st / top-10", "hit@1 delta / full"):  # fmt: skip
        table.add_column(column, justify="left" if column == "change" else "right")
    first = report["rows"][0]
    full = first["full"]
    table.add_row(
        f"first build ({first['sections']:,} sections, {first['package_bytes'] / 1e6:.1f} MB)",
        f"— / {full['build_s']:.1f}", "—", f"{full['publish_s']:.1f}", "—",
        f"{full['bytes_uploaded'] / 1e6:.2f} ({full['blobs_uploaded']:,})", "100",
        f"— / {full['d1_rows_written']:,}", "—", "—",
    )  # fmt: skip
    for row in report["rows"][1:]:
        delta, full = row["delta"], row.get("full", {})
        answers = row.get("answers")
        table.add_row(
            row["change"],
            f"{delta['build_s']:.2f} / {full.get('build_s', float('nan')):.1f}",
            f"{delta['scan_s']:.2f}", f"{delta['publish_s']:.2f}",
            f"{delta['build_publish_s']:.2f}",
            f"{delta['bytes_uploaded'] / 1e6:.3f} ({delta['blobs_uploaded']:,})",
            f"{100 * delta['uploaded_share']:.3f}",
            f"{delta['d1_rows_written']:,} / {full.get('d1_rows_written', '—')}",
            "—" if answers is None
            else f"{answers['same_first']:.3f} / {answers['same_top10_set']:.3f}",
            "—" if answers is None
            else f"{answers['hit1_delta']:.3f} / {answers['hit1_full']:.3f}",
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
    parser.add_argument("--queries", type=int, default=200, help="queries compared per change")
    parser.add_argument(
        "--compare",
        type=Path,
        metavar="WORK",
        help="only compare the active version of a finished run's --work folder with a full "
        "build of its folder (after --no-full: one full rebuild for all the changes)",
    )
    parser.add_argument(
        "--no-full",
        action="store_true",
        help="skip the full rebuild after each change (its columns repeat the incremental's)",
    )
    args = parser.parse_args(argv)
    if args.compare is not None:
        compared = asyncio.run(compare_with_full(args))
        args.out.write_text(json.dumps(compared, indent=2) + "\n", "utf-8")
        print(json.dumps(compared, indent=2))
        return 0
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
