"""Scale benchmark (issue 11): build, package, fetches per query, Worker heap and latency, CPython
latency against bm25s, on synthetic corpora of growing size.

    python bench/scale.py [--sections 10000 100000] [--root /work/synthetic] [--seed 1]
        [--tenants 20] [--topical 80] [--rounds 2] [--pyodide-max-sections N]
        [--no-cpython] [--no-bm25s] [--no-pyodide] [--no-plots] [--fresh] [--report-only]
        [--reuse-build]

For each size N: the corpus of bench/synthetic_corpus.py under ROOT/scale-N/ (generated unless it
is there with the same arguments), then

- ``kr build DIR --strict --embedder none --out PKG --state STATE --no-activate`` in a child
  process: wall and CPU seconds, peak RSS (``/usr/bin/time -v``, else ``os.wait4``), the bytes of
  the package folder; the version is then activated in that private state;
- the queries: every line of ``_queries.jsonl`` (tenant, date, page … as the file gives them)
  plus ``--topical`` queries drawn from the corpus itself (a heading or a phrase of a section,
  with the document's tenant), deduplicated;
- CPython, in-process (``kr.local.local_service``, no query cache): ``--rounds`` passes over the
  queries; end-to-end ms per query and the router's own ms (the sum of the trace's stage times);
  the last pass is reported, the first one gives the fetches;
- bm25s (numpy, CPython) over the same section texts (title, heading, body; the document's
  keywords, aliases and description on its first section), tokenized by our analyzer, top-10 per
  query (``get_scores`` + ``argpartition``), timed with the query's tokenization;
- the Worker in Pyodide (bench/worker_pyodide.py's ``run_worker``: the real ``src/entry.py``, a
  fresh host, the package published through the Worker's adapters): wasm heap booted → app →
  package → after all queries, the app import, the first query on the fresh isolate (package
  load, ms beyond the app import), warm end-to-end and router ms, and the fetches per query.

Fetches per query come from the response trace: every stage's ``bytes_fetched`` / ``bytes`` and
``round_trips`` are summed, so a new stage that reports the same keys is counted without a change
here. Cached responses (``served_from_cache``) are left out of them.

Every measurement of every size is caught on its own: a failure is printed and recorded under
``errors`` and the run goes on. Results: a table on stdout (rich), ``bench/scale.json`` (one row
per size; rows of sizes not measured in this run are kept unless ``--fresh``), and PNG curves
``bench/scale_*.png``. Corpora and packages are written under ROOT, outside the repository.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import gc
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
sys.path[:0] = [str(ROOT), str(BENCH)]

from kr.local import local_service  # noqa: E402
from router.adapters.local.state import LocalState  # noqa: E402
from router.contract import QueryRequest  # noqa: E402
from router.ops.activation import activate  # noqa: E402
from synthetic_corpus import QUERY_DAY  # noqa: E402
from worker_pyodide import (  # noqa: E402
    ISOLATE_MEMORY_BYTES,
    WorkerResponse,
    WorkerRun,
    percentile,
    router_ms,
    run_worker,
    trace_stages,
)

GENERATOR = BENCH / "synthetic_corpus.py"
RESULTS = BENCH / "scale.json"
TIME_V = Path("/usr/bin/time")
MIB = 1024 * 1024
TOP_K = 10  # bm25s: results per query
BYTES_KEYS = ("bytes_fetched", "bytes")  # trace keys summed over stages
ROUND_TRIP_KEYS = ("round_trips",)
REQUEST_FIELDS = ("tenant", "page", "tab", "focus", "date")
MACHINE = "shared 2-core VM (other agents' jobs may run at the same time)"


# -- child processes ------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One child process: exit status, wall and CPU seconds, peak RSS, output."""

    status: int
    wall_s: float
    cpu_s: float
    max_rss_mib: float
    rss_source: str
    stdout: str
    stderr: str


def run_measured(command: list[str]) -> Run:
    """Run ``command``; peak RSS from ``/usr/bin/time -v`` when present, else from this child's
    own rusage (``os.wait4``)."""
    timed = TIME_V.is_file()
    with tempfile.TemporaryDirectory(prefix="kr-scale-run-") as tmp:
        report, out, err = (Path(tmp) / name for name in ("time", "out", "err"))
        full = [str(TIME_V), "-v", "-o", str(report), *command] if timed else command
        started = time.perf_counter()
        with out.open("w") as stdout, err.open("w") as stderr:
            child = subprocess.Popen(full, stdout=stdout, stderr=stderr)
            _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        cpu, rss_mib, source = usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, "wait4"
        if timed and report.is_file():
            fields = dict(
                line.strip().rsplit(": ", 1)
                for line in report.read_text().splitlines()
                if ": " in line
            )
            if "Maximum resident set size (kbytes)" in fields:
                rss_mib = float(fields["Maximum resident set size (kbytes)"]) / 1024
                cpu = float(fields["User time (seconds)"]) + float(fields["System time (seconds)"])
                source = "/usr/bin/time -v"
        return Run(child.returncode, wall, cpu, rss_mib, source, out.read_text(), err.read_text())


# -- corpus, build ---------------------------------------------------------------------------


def ensure_corpus(folder: Path, sections: int, seed: int, tenants: int) -> dict[str, Any]:
    """The corpus in ``folder``: reused when its ``_corpus.json`` has the same arguments."""
    summary_file = folder / "_corpus.json"
    if summary_file.is_file():
        summary = json.loads(summary_file.read_text())
        if (summary["sections"], summary["seed"], summary["tenants"]) == (sections, seed, tenants):
            return dict(summary, generate_s=None, reused=True)
    command = [sys.executable, str(GENERATOR), "--sections", str(sections), "--out", str(folder)]
    command += ["--seed", str(seed), "--tenants", str(tenants), "--force", "--quiet"]
    result = run_measured(command)
    if result.status != 0:
        raise RuntimeError(f"generator failed ({result.status}): {result.stderr[-500:]}")
    summary = json.loads(result.stdout)
    return dict(summary, generate_s=round(result.wall_s, 1), reused=False)


def folder_bytes(folder: Path) -> tuple[int, int]:
    """Total bytes and number of files under ``folder`` (recursive: shards may be folders)."""
    files = [p for p in folder.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)


def build(corpus: Path, work: Path) -> tuple[dict[str, Any], Path, Path]:
    """``kr build`` into a fresh private state; its figures, the package folder and the state."""
    package_dir, state = work / "package", work / "state"
    for path in (package_dir, state):
        shutil.rmtree(path, ignore_errors=True)
    command = [sys.executable, "-m", "kr.cli", "build", str(corpus), "--strict"]
    command += ["--embedder", "none", "--out", str(package_dir), "--state", str(state)]
    result = run_measured([*command, "--no-activate"])
    if result.status != 0:
        raise RuntimeError(f"kr build failed ({result.status}): {result.stderr[-800:]}")
    version = result.stdout.split("knowledge version ")[1].split()[0]
    asyncio.run(activate(LocalState(state).kv, version))
    package = package_dir / version
    size, files = folder_bytes(package)
    counts = json.loads((package / "manifest.json").read_text()).get("counts", {})
    figures = {
        "version": version,
        "wall_s": round(result.wall_s, 2),
        "cpu_s": round(result.cpu_s, 2),
        "max_rss_mib": round(result.max_rss_mib, 1),
        "rss_source": result.rss_source,
        "package_bytes": size,
        "package_files": files,
        "terms": counts.get("terms"),
        "postings": counts.get("postings"),
    }
    return figures, package, state


def reused_build(work: Path, results: Path, sections: int) -> tuple[dict[str, Any], Path, Path]:
    """The package an earlier run built in ``work`` (``--reuse-build``), with that run's build
    figures from ``results`` when it has a row of this size (a 1M build takes ≈ 12 min)."""
    package_dir, state = work / "package", work / "state"
    versions = sorted(p for p in package_dir.iterdir() if (p / "manifest.json").is_file())
    if len(versions) != 1:
        raise RuntimeError(f"--reuse-build needs one built version in {package_dir}")
    package = versions[0]
    figures: dict[str, Any] = {"version": package.name, "reused": True}
    if results.is_file():
        for row in json.loads(results.read_text(encoding="utf-8")).get("rows", []):
            if row.get("sections") == sections and _get(row, "build", "version") == package.name:
                figures = {**row["build"], "reused": True}
    return figures, package, state


# -- queries ---------------------------------------------------------------------------------

_ID = re.compile(r"\s*\{#[^}]*\}\s*$")
_LINK = re.compile(r"\[\[([^\]|]+)(?:\|([^\]]+))?\]\]")
_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")


def _plain(line: str) -> str:
    line = _LINK.sub(lambda m: m.group(2) or m.group(1).rsplit(".", 1)[-1], line)
    return line.replace("**", "").replace("`", "")


def topical_queries(corpus: Path, count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` queries drawn from the corpus: alternately a section heading and 4–8 running
    words of a section's body, each with its document's tenant (deterministic per seed)."""
    if count <= 0:
        return []
    files = sorted(p for p in corpus.rglob("*.md"))
    rng = random.Random(f"bench/scale.py:{seed}")
    rows: list[dict[str, Any]] = []
    for path in rng.sample(files, min(len(files), 3 * count)):
        if len(rows) == count:
            break
        parts = path.relative_to(corpus).parts
        tenant = parts[1] if parts[0] == "tenants" and len(parts) > 2 else None
        body = path.read_text(encoding="utf-8").split("\n---\n", 1)[-1]
        if len(rows) % 2 == 0:
            headings = [_ID.sub("", line[3:]) for line in body.splitlines() if line[:3] == "## "]
            if not headings:
                continue
            text, category = rng.choice(headings).lower(), "topical_heading"
        else:
            paragraphs = [
                _WORD.findall(_plain(line))
                for line in body.splitlines()
                if line and not line.startswith(("#", "-", "|", ">"))
            ]
            paragraphs = [words for words in paragraphs if len(words) >= 8]
            if not paragraphs:
                continue
            words = rng.choice(paragraphs)
            size = rng.randint(4, 8)
            start = rng.randrange(len(words) - size + 1)
            text, category = " ".join(words[start : start + size]).lower(), "topical_phrase"
        rows.append(
            {"id": f"t{len(rows) + 1:04d}", "query": text, "category": category,
             "tenant": tenant, "date": QUERY_DAY}
        )  # fmt: skip
    return rows


def load_queries(corpus: Path, topical: int, seed: int) -> list[dict[str, Any]]:
    """The query file's lines and the topical ones, deduplicated on what a request carries."""
    lines = (corpus / "_queries.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    rows += topical_queries(corpus, topical, seed)
    seen: set[tuple[Any, ...]] = set()
    unique = []
    for row in rows:
        key = (row["query"], *(row.get(f) for f in REQUEST_FIELDS))
        if key not in seen:
            seen.add(key)
            unique.append(row)
    return unique


def request_body(row: dict[str, Any]) -> dict[str, Any]:
    """The JSON body of ``/v1/query`` for a query row (fields the row leaves empty are omitted)."""
    body = {"query": row["query"][:2000]}
    body.update({f: row[f] for f in REQUEST_FIELDS if row.get(f) is not None})
    return body


# -- fetches and percentiles -----------------------------------------------------------------


def fetch_cost(stages: dict[str, dict[str, Any]]) -> tuple[int, int, dict[str, int]]:
    """Bytes and round trips a query's trace reports, summed over its stages; bytes per stage."""
    total_bytes = total_trips = 0
    per_stage: dict[str, int] = {}
    for name, details in stages.items():
        stage_bytes = sum(int(details.get(k) or 0) for k in BYTES_KEYS)
        total_bytes += stage_bytes
        total_trips += sum(int(details.get(k) or 0) for k in ROUND_TRIP_KEYS)
        if stage_bytes:
            per_stage[name] = stage_bytes
    return total_bytes, total_trips, per_stage


def spread(values: list[float], digits: int = 2) -> dict[str, float | None]:
    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, digits)

    mean = sum(values) / len(values) if values else None
    return {
        "p50": rounded(percentile(values, 50)),
        "p95": rounded(percentile(values, 95)),
        "mean": rounded(mean),
        "max": rounded(max(values) if values else None),
        "n": len(values),
    }


def fetch_summary(traces: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """p50/p95 of bytes and round trips per query over responses' traces (cached ones left out)."""
    bytes_, trips, cached = [], [], 0
    by_stage: dict[str, int] = {}
    for trace in traces:
        if trace.get("served_from_cache"):
            cached += 1
            continue
        stages = {k: v for k, v in trace.get("stages", {}).items() if isinstance(v, dict)}
        total, round_trips, per_stage = fetch_cost(stages)
        bytes_.append(float(total))
        trips.append(float(round_trips))
        for name, value in per_stage.items():
            by_stage[name] = by_stage.get(name, 0) + value
    return {
        "bytes": spread(bytes_, 0),
        "round_trips": spread(trips),
        "bytes_by_stage_total": by_stage,
        "cached_left_out": cached,
    }


def stage_times(traces: Iterable[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """p50/p95/mean ms of each stage over responses' traces (a stage absent from a query is
    not counted for it): where a serving path spends its time."""
    times: dict[str, list[float]] = {}
    for trace in traces:
        for name, details in trace.get("stages", {}).items():
            if isinstance(details, dict) and isinstance(details.get("ms"), int | float):
                times.setdefault(name, []).append(float(details["ms"]))
    ordered = sorted(times.items(), key=lambda item: -sum(item[1]))
    return {name: spread(values) for name, values in ordered}


# -- CPython: our router in-process and bm25s ------------------------------------------------


def _request(row: dict[str, Any]) -> QueryRequest:
    return QueryRequest(**request_body(row))


async def _router_passes(state: Path, rows: list[dict[str, Any]], rounds: int) -> dict[str, Any]:
    service = local_service(state, cache=False)
    requests = [_request(row) for row in rows]
    passes, first_ms, fetches = [], None, None
    for number in range(max(1, rounds)):
        e2e, router, traces = [], [], []
        for index, request in enumerate(requests):
            started = time.perf_counter()
            response = await service.query(request)
            ms = (time.perf_counter() - started) * 1000
            if number == 0 and index == 0:
                first_ms = ms  # the package load
                continue
            e2e.append(ms)
            router.append(router_ms(response.trace.get("stages", {})))
            traces.append(response.trace)
        if number == 0:
            fetches = fetch_summary(traces)
        passes.append(
            {"e2e_ms": spread(e2e), "router_ms": spread(router), "stage_ms": stage_times(traces)}
        )
    last = passes[-1]
    return {
        "first_query_ms": round(first_ms or 0.0, 1),
        "e2e_ms": last["e2e_ms"],
        "router_ms": last["router_ms"],
        "stage_ms": last["stage_ms"],
        "passes": passes,
        "fetch_first_pass": fetches,
        "queries": len(requests),
    }


def bm25_top(trace: dict[str, Any]) -> list[str]:
    """The BM25 stage's top sections as the trace names them (its first ``TRACE_TOP_N``)."""
    stage = trace.get("stages", {}).get("bm25", {})
    return [str(ref) for ref, _ in stage.get("candidates", [])] if isinstance(stage, dict) else []


async def budget_loss(
    state: Path, requests: list[QueryRequest], max_postings: int | None = None
) -> dict[str, Any]:
    """What the postings budgets (the defaults, or ``max_postings``) cost: the queries they
    cut short (in scoring, by leaving a common term's list unfetched, or by reading its head page
    only), and for them the
    overlap of the BM25 top 10 with the same query scored without a budget (exact), and how
    often the first section is the same."""
    budgeted = local_service(state, cache=False)
    if max_postings is not None:
        cut_budget = replace(budgeted.config.budget, max_postings=max_postings)
        budgeted.config = replace(budgeted.config, budget=cut_budget)
    exact = local_service(state, cache=False)
    limits = replace(
        exact.config.budget,
        max_postings=10**12,
        max_fetched_postings=10**12,
        max_whole_long_postings=10**12,  # every long list read whole, never its head page
        max_latency_ms=10**9,
    )
    exact.config = replace(exact.config, budget=limits)
    overlaps, same_first, cut = [], 0, 0
    for request in requests:
        response = await budgeted.query(request)
        stage = response.trace.get("stages", {}).get("bm25", {})
        if not (isinstance(stage, dict) and stage.get("truncated")):
            continue
        cut += 1
        ours, reference = bm25_top(response.trace), bm25_top((await exact.query(request)).trace)
        overlaps.append(len(set(ours) & set(reference)) / max(1, len(reference)))
        same_first += bool(ours and reference and ours[0] == reference[0])
    return {
        "queries": len(requests),
        "truncated": cut,
        "top10_overlap_mean": round(sum(overlaps) / len(overlaps), 4) if overlaps else None,
        "top10_overlap_min": round(min(overlaps), 4) if overlaps else None,
        "same_first": same_first,
    }


def cpython_router(state: Path, rows: list[dict[str, Any]], rounds: int) -> dict[str, Any]:
    """Our router in this process (``kr query``'s service, no query cache), ``rounds`` passes,
    and what its postings budget cost (``budget_loss``)."""
    figures = asyncio.run(_router_passes(state, rows, rounds))
    figures["budget_loss"] = asyncio.run(budget_loss(state, [_request(row) for row in rows]))
    return figures


def section_texts(corpus: Path) -> list[str]:
    """The text of every section as the parser reads it: title, heading and body (links as their
    visible text); the document's keywords, aliases and description on its first section."""
    from router.compile.corpus import load_knowledge
    from router.knowledge.parser import strip_wikilinks

    texts = []
    for doc in load_knowledge(corpus).documents:
        for number, section in enumerate(doc.sections):
            parts = [doc.title, section.heading, strip_wikilinks(section.text)]
            if number == 0:
                parts += [*doc.keywords, *doc.aliases, doc.description]
            texts.append(" ".join(p for p in parts if p))
    return texts


def bm25s_latency(corpus: Path, rows: list[dict[str, Any]], rounds: int) -> dict[str, Any]:
    """bm25s (numpy) over the same sections, tokenized by our analyzer; ms per query, top-10."""
    import bm25s
    import numpy as np

    from router.analysis.analyzer import Analyzer

    started = time.perf_counter()
    texts = section_texts(corpus)
    analyzer = Analyzer()
    tokens = [analyzer.terms(text) for text in texts]
    parse_s = time.perf_counter() - started
    started = time.perf_counter()
    retriever = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    retriever.index(tokens, show_progress=False)
    index_s = time.perf_counter() - started
    vocabulary = retriever.vocab_dict
    del tokens
    k = min(TOP_K, len(texts) - 1)

    def ask(query: str) -> None:
        known = [t for t in analyzer.terms(query) if t in vocabulary]
        if known:
            scores = retriever.get_scores(known)
            top = np.argpartition(-scores, k)[:k]
            top[np.argsort(-scores[top])]

    queries = [row["query"] for row in rows]
    for query in queries:  # warm the analyzer's stem cache, as the router's is after a pass
        ask(query)
    passes = []
    for _ in range(max(1, rounds)):
        times = []
        for query in queries:
            started = time.perf_counter()
            ask(query)
            times.append((time.perf_counter() - started) * 1000)
        passes.append(spread(times, 3))
    last = passes[-1]
    return {
        "version": bm25s.__version__,
        "sections": len(texts),
        "parse_and_tokenize_s": round(parse_s, 1),
        "index_s": round(index_s, 2),
        "ms": last,
        "qps": round(1000 / last["mean"], 1) if last["mean"] else None,
        "passes": passes,
    }


# -- the Worker in Pyodide -------------------------------------------------------------------


def pyodide_figures(
    label: str, package: Path, rows: list[dict[str, Any]], work: Path
) -> dict[str, Any]:
    """The Worker in a fresh host: heap at each step, first query, warm latency, fetches."""
    bodies = [request_body(row) for row in rows]

    def progress(number: int) -> None:
        if number % 50 == 0:
            print(f"  pyodide {label}: {number}/{len(bodies) - 1} warm queries", flush=True)

    started = time.perf_counter()
    run: WorkerRun = run_worker(
        label, package, bodies, work, query_log=False, on_progress=progress, bulk=True
    )
    statuses: dict[str, int] = {}
    e2e, router, traces = [], [], []
    for response in run.warm:
        statuses[str(response.status)] = statuses.get(str(response.status), 0) + 1
        if response.status != 200:
            continue
        e2e.append(response.ms)
        router.append(router_ms(trace_stages(response)))
        traces.append(response.json().get("trace", {}))
    heap = {
        "booted": run.heap_booted_bytes,
        "app": run.heap_app_bytes,
        "package": run.heap_loaded_bytes,
        "after_queries": run.heap_after_bytes,
        "used_after_queries": run.heap_used_after_bytes,
    }
    exceeded = run.heap_after_bytes > ISOLATE_MEMORY_BYTES
    return {
        "seconds": round(time.perf_counter() - started, 1),
        "heap_bytes": heap,
        "heap_exceeds_isolate_limit": exceeded,
        "note": (
            f"exceeded: wasm heap {run.heap_after_bytes / MIB:.0f} MiB > 128 MB isolate limit"
            if exceeded
            else None
        ),
        "first_request_ms": round(run.app_import.ms, 1),  # the app import
        "first_query_status": run.first.status,
        "first_query_ms": round(run.first.ms, 1),  # beyond the app import: the package load
        "first_query_stage_ms": _first_stages(run.first),
        "first_query_load": _first_load(run.first),
        "e2e_ms": spread(e2e),
        "router_ms": spread(router),
        "statuses": statuses,
        "fetch": fetch_summary(traces),
        "stage_ms": stage_times(traces),
        "startup_timings_ms": run.startup_timings_ms,
    }


def _first_load(response: WorkerResponse) -> dict[str, Any]:
    """What the cold query spent loading the package (its trace's ``package_load``)."""
    try:
        load = response.json().get("trace", {}).get("package_load", {})
    except ValueError:
        return {}
    return load if isinstance(load, dict) else {}


def _first_stages(response: WorkerResponse) -> dict[str, float]:
    """The cold query's stage times, slowest first (what the first query spends besides the
    package load: its first reads of each kind of chunk)."""
    if response.status != 200:
        return {}
    stages = trace_stages(response)
    timed = {n: float(d.get("ms") or 0.0) for n, d in stages.items() if isinstance(d, dict)}
    return {n: round(ms, 1) for n, ms in sorted(timed.items(), key=lambda i: -i[1]) if ms >= 0.5}


# -- one size --------------------------------------------------------------------------------


def label_of(sections: int) -> str:
    if sections % 1_000_000 == 0:
        return f"{sections // 1_000_000}m"
    return f"{sections // 1000}k" if sections % 1000 == 0 else str(sections)


def conditions() -> dict[str, Any]:
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    return {
        "date": dt.datetime.now().isoformat(timespec="seconds"),
        "commit": commit + ("+dirty" if dirty else ""),
        "python": platform.python_version(),
        "machine": MACHINE,
        "cpus": os.cpu_count(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
    }


def attempt(row: dict[str, Any], key: str, measure: Callable[[], Any]) -> Any:
    """Run one measurement; on failure print and record the error, and return None."""
    print(f"[{row['label']}] {key} …", flush=True)
    started = time.perf_counter()
    try:
        value = measure()
    except Exception as exc:
        reason = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}"
        row["errors"][key] = f"failed: {reason}"
        print(f"[{row['label']}] {key} FAILED: {reason}", file=sys.stderr, flush=True)
        traceback.print_exc(limit=3, file=sys.stderr)
        return None
    print(f"[{row['label']}] {key} done in {time.perf_counter() - started:.1f} s", flush=True)
    return value


def measure_size(sections: int, args: argparse.Namespace) -> dict[str, Any]:
    label = label_of(sections)
    row: dict[str, Any] = {"sections": sections, "label": label, "errors": {}}
    row["conditions"] = conditions()
    corpus_dir = args.root / f"scale-{sections}"
    work = args.root / f"scale-{sections}-work"
    corpus = attempt(
        row, "corpus", lambda: ensure_corpus(corpus_dir, sections, args.seed, args.tenants)
    )
    if corpus is None:
        return row
    row["corpus"] = {
        k: corpus.get(k)
        for k in ("documents", "markdown_bytes", "queries", "seed", "tenants", "generate_s")
    }
    rows = attempt(row, "queries", lambda: load_queries(corpus_dir, args.topical, args.seed))
    if rows is None:
        return row
    row["queries"] = {
        "count": len(rows),
        "from_file": sum(1 for r in rows if not r["id"].startswith("t")),
        "topical": sum(1 for r in rows if r["id"].startswith("t")),
        "with_tenant": sum(1 for r in rows if r.get("tenant")),
        "other_dates": sum(1 for r in rows if r.get("date") not in (None, QUERY_DAY)),
    }
    built = attempt(
        row,
        "build",
        lambda: (
            reused_build(work, args.out, sections) if args.reuse_build else build(corpus_dir, work)
        ),
    )
    if built is None:
        return row
    row["build"], package, state = built
    if not args.no_cpython:
        row["cpython"] = attempt(row, "cpython", lambda: cpython_router(state, rows, args.rounds))
        gc.collect()
    if not args.no_bm25s:
        row["bm25s"] = attempt(row, "bm25s", lambda: bm25s_latency(corpus_dir, rows, args.rounds))
        gc.collect()
    ours, theirs = row.get("cpython"), row.get("bm25s")
    if ours and theirs and theirs["ms"]["p50"]:
        row["ours_over_bm25s_p50"] = round(ours["e2e_ms"]["p50"] / theirs["ms"]["p50"], 1)
        row["ours_router_over_bm25s_p50"] = round(ours["router_ms"]["p50"] / theirs["ms"]["p50"], 1)
    pyodide_cap = args.pyodide_max_sections
    if args.no_pyodide:
        pass
    elif pyodide_cap is not None and sections > pyodide_cap:
        row["errors"]["pyodide"] = f"skipped: --pyodide-max-sections {pyodide_cap}"
    else:
        with tempfile.TemporaryDirectory(prefix=f"kr-scale-{label}-") as tmp:
            row["pyodide"] = attempt(
                row, "pyodide", lambda: pyodide_figures(label, package, rows, Path(tmp))
            )
    return row


# -- report ----------------------------------------------------------------------------------


def _get(row: dict[str, Any], *path: str) -> Any:
    value: Any = row
    for key in path:
        if not isinstance(value, dict) or value.get(key) is None:
            return None
        value = value[key]
    return value


def _pair(row: dict[str, Any], *path: str, digits: int = 1, scale: float = 1.0) -> str:
    values = [_get(row, *path, p) for p in ("p50", "p95")]
    if any(v is None for v in values):
        return "—"
    return " / ".join(f"{v / scale:,.{digits}f}" for v in values)


def _num(value: Any, digits: int = 0, scale: float = 1.0) -> str:
    return "—" if value is None else f"{value / scale:,.{digits}f}"


def fetch_of(row: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The fetches of the Worker's run when it ran, else of the CPython first pass."""
    if _get(row, "pyodide", "fetch"):
        return row["pyodide"]["fetch"], "worker"
    if _get(row, "cpython", "fetch_first_pass"):
        return row["cpython"]["fetch_first_pass"], "cpython"
    return None, ""


def _fetched(row: dict[str, Any], key: str, scale: float) -> str:
    fetch, source = fetch_of(row)
    if fetch is None:
        return "—"
    mean = _get(fetch, key, "mean")
    tail = f" ({mean / scale:,.1f})" if mean is not None else ""
    return _pair(fetch, key, scale=scale) + tail + ("" if source == "worker" else " *")


def heap_text(row: dict[str, Any]) -> str:
    heap = _get(row, "pyodide", "heap_bytes")
    if heap is None:
        return _get(row, "errors", "pyodide") or "not run"
    steps = " → ".join(
        f"{heap[k] / MIB:.0f}" for k in ("booted", "app", "package", "after_queries")
    )
    return steps + (" (exceeds 128 MB)" if row["pyodide"]["heap_exceeds_isolate_limit"] else "")


COLUMNS = [
    ("sections", lambda r: f"{r['sections']:,}"),
    ("queries", lambda r: _num(_get(r, "queries", "count"), 0)),
    ("build s", lambda r: _num(_get(r, "build", "wall_s"), 1)),
    ("build peak RSS MiB", lambda r: _num(_get(r, "build", "max_rss_mib"), 0)),
    ("package MB", lambda r: _num(_get(r, "build", "package_bytes"), 1, 1e6)),
    ("KiB fetched / query p50 / p95 (mean)", lambda r: _fetched(r, "bytes", 1024)),
    ("round trips / query p50 / p95 (mean)", lambda r: _fetched(r, "round_trips", 1.0)),
    ("wasm heap MiB: booted → app → package → after", heap_text),
    ("Worker first query ms (package load)", lambda r: _num(_get(r, "pyodide", "first_query_ms"))),
    ("Worker router p50 / p95 ms", lambda r: _pair(r, "pyodide", "router_ms")),
    ("Worker end-to-end p50 / p95 ms", lambda r: _pair(r, "pyodide", "e2e_ms")),
    ("CPython router p50 / p95 ms", lambda r: _pair(r, "cpython", "router_ms", digits=2)),
    ("CPython end-to-end p50 / p95 ms", lambda r: _pair(r, "cpython", "e2e_ms", digits=2)),
    ("bm25s p50 / p95 ms", lambda r: _pair(r, "bm25s", "ms", digits=3)),
    ("bm25s q/s", lambda r: _num(_get(r, "bm25s", "qps"), 0)),
    ("ours / bm25s (p50, end-to-end)", lambda r: _num(r.get("ours_over_bm25s_p50"), 1)),
]  # fmt: skip


def print_table(rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="bench/scale.py", show_lines=False)
    for name, _ in COLUMNS:
        table.add_column(name, justify="left" if name.startswith("wasm") else "right")
    for row in rows:
        table.add_row(*(cell(row) for _, cell in COLUMNS))
    Console(width=260).print(table)
    for row in rows:
        for key, error in row.get("errors", {}).items():
            print(f"  {row['label']} {key}: {error}")
        if fetch_of(row)[1] == "cpython":
            print(f"  {row['label']}: * fetches of the CPython first pass (no Worker run)")
        note = _get(row, "pyodide", "note")
        if note:
            print(f"  {row['label']} pyodide: {note}")


def markdown_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(name for name, _ in COLUMNS) + " |"]
    lines.append(
        "|" + "|".join("---" if n.startswith("wasm") else "---:" for n, _ in COLUMNS) + "|"
    )
    lines += ["| " + " | ".join(cell(row) for _, cell in COLUMNS) + " |" for row in rows]
    return "\n".join(lines)


def merge(previous: Path, rows: list[dict[str, Any]], fresh: bool) -> list[dict[str, Any]]:
    """This run's rows, plus the stored rows of other sizes unless ``fresh``."""
    kept: dict[int, dict[str, Any]] = {}
    if not fresh and previous.is_file():
        try:
            kept = {r["sections"]: r for r in json.loads(previous.read_text())["rows"]}
        except (ValueError, KeyError, TypeError):
            kept = {}
    kept.update({r["sections"]: r for r in rows})
    return [kept[k] for k in sorted(kept)]


def plot(rows: list[dict[str, Any]], out: Path) -> list[Path]:
    """Curves over the corpus size (log x): build, memory, fetches, latency."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def series(*path: str, scale: float = 1.0) -> tuple[list[int], list[float]]:
        points = [(r["sections"], _get(r, *path)) for r in rows]
        kept = [(x, y / scale) for x, y in points if y is not None]
        return [x for x, _ in kept], [y for _, y in kept]

    def panel(ax: Any, title: str, ylabel: str, curves: list[tuple[str, tuple[str, ...], float]]):
        for name, path, scale in curves:
            xs, ys = series(*path, scale=scale)
            if xs:
                ax.plot(xs, ys, marker="o", label=name)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("sections")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)

    written = []
    figures: dict[str, list[tuple[str, str, list[tuple[str, tuple[str, ...], float]]]]] = {
        "scale_build.png": [
            ("kr build", "seconds", [("build wall s", ("build", "wall_s"), 1.0)]),
            ("size and memory", "MiB", [
                ("package", ("build", "package_bytes"), MIB),
                ("build peak RSS", ("build", "max_rss_mib"), 1.0),
                ("wasm heap after queries", ("pyodide", "heap_bytes", "after_queries"), MIB),
            ]),
        ],
        "scale_latency.png": [
            ("p50 per query", "ms", [
                ("CPython end-to-end", ("cpython", "e2e_ms", "p50"), 1.0),
                ("CPython router", ("cpython", "router_ms", "p50"), 1.0),
                ("Worker end-to-end", ("pyodide", "e2e_ms", "p50"), 1.0),
                ("Worker router", ("pyodide", "router_ms", "p50"), 1.0),
                ("bm25s", ("bm25s", "ms", "p50"), 1.0),
            ]),
            ("p95 per query", "ms", [
                ("CPython end-to-end", ("cpython", "e2e_ms", "p95"), 1.0),
                ("CPython router", ("cpython", "router_ms", "p95"), 1.0),
                ("Worker end-to-end", ("pyodide", "e2e_ms", "p95"), 1.0),
                ("Worker router", ("pyodide", "router_ms", "p95"), 1.0),
                ("bm25s", ("bm25s", "ms", "p95"), 1.0),
            ]),
        ],
        "scale_fetch.png": [
            ("bytes fetched per query", "KiB", [
                ("Worker p50", ("pyodide", "fetch", "bytes", "p50"), 1024),
                ("Worker p95", ("pyodide", "fetch", "bytes", "p95"), 1024),
                ("CPython p50", ("cpython", "fetch_first_pass", "bytes", "p50"), 1024),
                ("CPython p95", ("cpython", "fetch_first_pass", "bytes", "p95"), 1024),
            ]),
            ("round trips per query", "round trips", [
                ("Worker p50", ("pyodide", "fetch", "round_trips", "p50"), 1.0),
                ("Worker p95", ("pyodide", "fetch", "round_trips", "p95"), 1.0),
                ("CPython p50", ("cpython", "fetch_first_pass", "round_trips", "p50"), 1.0),
                ("CPython p95", ("cpython", "fetch_first_pass", "round_trips", "p95"), 1.0),
            ]),
        ],
    }  # fmt: skip
    for name, panels in figures.items():
        fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.2))
        for ax, (title, ylabel, curves) in zip(
            axes if len(panels) > 1 else [axes], panels, strict=True
        ):
            panel(ax, title, ylabel, curves)
            if any(path[0] == "pyodide" and "heap_bytes" in path for _, path, _ in curves):
                ax.axhline(ISOLATE_MEMORY_BYTES / MIB, color="grey", linestyle="--", linewidth=1)
                ax.annotate("isolate limit 128 MB", (rows[0]["sections"], 128e6 / MIB), fontsize=8)
        fig.suptitle(f"bench/scale.py — {name.removeprefix('scale_').removesuffix('.png')}")
        fig.tight_layout()
        path = out / name
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sections", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--root", type=Path, default=Path("/work/synthetic"))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument(
        "--topical", type=int, default=80, help="queries drawn from the corpus text, added"
    )
    parser.add_argument("--rounds", type=int, default=2, help="CPython passes (last reported)")
    parser.add_argument("--pyodide-max-sections", type=int, help="no Worker run above this size")
    parser.add_argument("--no-cpython", action="store_true", help="skip our router in-process")
    parser.add_argument("--no-bm25s", action="store_true", help="skip bm25s")
    parser.add_argument("--no-pyodide", action="store_true", help="skip the Worker in Pyodide")
    parser.add_argument("--no-plots", action="store_true", help="no PNG curves")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the JSON of the raw figures")
    parser.add_argument("--fresh", action="store_true", help="drop stored rows of other sizes")
    parser.add_argument(
        "--reuse-build", action="store_true", help="measure the package an earlier run built"
    )
    parser.add_argument(
        "--report-only", action="store_true", help="measure nothing: table and plots of --out"
    )
    args = parser.parse_args(argv)
    if args.root.resolve().is_relative_to(ROOT):
        parser.error("--root must be outside the repository (corpora are never committed)")
    rows: list[dict[str, Any]] = []
    for sections in [] if args.report_only else args.sections:
        try:
            rows.append(measure_size(sections, args))
        except Exception as exc:  # a bug of this script for one size: the others still run
            traceback.print_exc()
            rows.append({"sections": sections, "label": label_of(sections),
                         "errors": {"size": f"failed: {type(exc).__name__}: {exc}"}})  # fmt: skip
        print(json.dumps(rows[-1], default=str)[:2000], flush=True)
    merged = merge(args.out, rows, args.fresh and not args.report_only)
    if not args.report_only:
        document = {"generated_by": "bench/scale.py", "rows": merged}
        args.out.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    print_table(merged)
    print()
    print(markdown_table(merged))
    if not args.no_plots:
        try:
            for path in plot(merged, args.out.parent):
                print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
        except Exception as exc:
            print(f"plots failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    if not args.report_only:
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
