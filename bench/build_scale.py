"""``kr build`` at scale: wall time and peak RSS on synthetic corpora, package bytes, ``kr query``
peak RSS, and the quality of the by-construction query set.

    python bench/build_scale.py --sections 10000 100000 [--root /work/synthetic] [--seed 1]
        [--tenants 20] [--no-query] [--no-eval] [--bm25s]

For each size: the corpus (bench/synthetic_corpus.py) is generated under ROOT/<size>/ unless it
is there already with the same arguments; ``kr build DIR --strict --embedder none --out PKG
--state STATE --no-activate`` runs in a child process, whose wall time, CPU time and peak RSS
(``os.wait4``'s rusage) are reported; then the version is activated in that private state and
``kr query`` is timed the same way (cold: load, verify and decode the package, one answer), with
the sample knowledge as the baseline; ``kr eval ROOT/<size>/_queries.jsonl --package PKG`` gives
hit@1, MRR, abstention accuracy and forbidden leaks. With ``--bm25s``, bm25s indexes the same
sections in another child (``scale.section_texts``: title, heading, body, the document's fields
on its first section; tokenized by our analyzer): its parse, tokenize and index seconds and its
peak RSS, beside the build's. Everything is written under ROOT, outside the repository.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
from itertools import pairwise
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from scale import Run, build, ensure_corpus, section_texts  # noqa: E402  (one cache, one build)
from scale import run_measured as run  # noqa: E402

SAMPLE = ROOT / "knowledge"
QUERY_DAY = "2026-06-15"  # bench/synthetic_corpus.py's QUERY_DAY
# One strong query (a signature word) and one weak one that runs the corrective expansion.
WEAK_QUERY = "o que é kwakyek de permisão?"


def label(sections: int) -> str:
    if sections % 1_000_000 == 0:
        return f"{sections // 1_000_000}m"
    return f"{sections // 1000}k" if sections % 1000 == 0 else str(sections)


def query(state: Path, text: str) -> Run:
    command = [sys.executable, "-m", "kr.cli", "query", text, "--state", str(state)]
    return run([*command, "--date", QUERY_DAY])


def evaluate(queries: Path, package: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "kr.cli", "eval", str(queries), "--package", str(package)]
    result = run([*command, "--today", QUERY_DAY, "--no-report", "--json"])
    overall = json.loads(result.stdout.strip().splitlines()[-1])["overall"]
    keys = ("hit@1", "mrr", "abstention_acc", "forbidden_leaks")
    return {k: round(overall[k], 3) if overall.get(k) is not None else None for k in keys}


def bm25s_index(corpus: Path) -> dict[str, Any]:
    """bm25s's index of the sections of ``corpus``, in a child: seconds per step, peak RSS."""
    result = run([sys.executable, str(Path(__file__)), "--bm25s-child", str(corpus)])
    if result.status != 0:
        raise RuntimeError(f"bm25s child failed ({result.status}): {result.stderr[-800:]}")
    figures: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    figures["bm25s_wall_s"] = round(result.wall_s, 1)
    figures["bm25s_rss_mib"] = round(result.max_rss_mib)
    return figures


def bm25s_child(corpus: Path) -> None:
    """Parse, tokenize (our analyzer) and index (bm25s, lucene, k1 1.5, b 0.75): wall and CPU
    seconds of each step (CPU: this process's, what a loaded machine does not inflate)."""
    import time

    import bm25s

    from router.analysis.analyzer import Analyzer

    marks = [(time.perf_counter(), time.process_time())]
    texts = section_texts(corpus)
    marks.append((time.perf_counter(), time.process_time()))
    analyzer = Analyzer()
    tokens = [analyzer.terms(text) for text in texts]
    marks.append((time.perf_counter(), time.process_time()))
    bm25s.BM25(method="lucene", k1=1.5, b=0.75).index(tokens, show_progress=False)
    marks.append((time.perf_counter(), time.process_time()))
    figures: dict[str, Any] = {"bm25s_version": bm25s.__version__, "bm25s_sections": len(texts)}
    for step, (before, after) in zip(("parse", "tokenize", "index"), pairwise(marks), strict=True):
        figures[f"bm25s_{step}_s"] = round(after[0] - before[0], 2)
        figures[f"bm25s_{step}_cpu_s"] = round(after[1] - before[1], 2)
    print(json.dumps(figures))


def sample_query_rss(work: Path) -> float:
    """``kr query`` peak RSS on the sample knowledge: the baseline of the query columns."""
    state = work / "state"
    shutil.rmtree(state, ignore_errors=True)
    command = [sys.executable, "-m", "kr.cli", "build", str(SAMPLE), "--embedder", "none"]
    if run([*command, "--state", str(state), "--force"]).status != 0:
        raise SystemExit("kr build knowledge failed")
    return max(query(state, WEAK_QUERY).max_rss_mib, query(state, "O que é APR?").max_rss_mib)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sections", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--root", type=Path, default=Path("/work/synthetic"))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--no-query", action="store_true", help="skip the kr query columns")
    parser.add_argument("--no-eval", action="store_true", help="skip the kr eval columns")
    parser.add_argument("--bm25s", action="store_true", help="bm25s's index of the sections")
    parser.add_argument("--bm25s-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.bm25s_child is not None:
        bm25s_child(args.bm25s_child)
        return 0
    if args.root.resolve().is_relative_to(ROOT):
        parser.error("--root must be outside the repository (corpora are never committed)")
    rows = []
    baseline = None if args.no_query else sample_query_rss(args.root / "bench-sample")
    for sections in args.sections:
        name = label(sections)
        corpus = ensure_corpus(args.root / name, sections, args.seed, args.tenants)
        built, package, _ = build(args.root / name, args.root / f"bench-{name}")
        manifest = json.loads((package / "manifest.json").read_text())
        row: dict[str, Any] = {
            "sections": sections,
            "files": corpus["documents"],
            "markdown_bytes": corpus["markdown_bytes"],
            "generate_s": corpus["generate_s"],
            "build_wall_s": round(built["wall_s"], 1),
            "build_cpu_s": round(built["cpu_s"], 1),
            "build_rss_mib": round(built["max_rss_mib"]),
            "package_bytes": built["package_bytes"],
            "terms": manifest["counts"]["terms"],
            "postings": manifest["counts"]["postings"],
            "version": built["version"],
        }
        if baseline is not None:
            state = args.root / f"bench-{name}" / "state"
            signature = json.loads((args.root / name / "_queries.jsonl").read_text().split("\n")[0])
            runs = [query(state, WEAK_QUERY), query(state, signature["query"])]
            row["query_s"] = round(max(r.wall_s for r in runs), 2)
            row["query_rss_mib"] = round(max(r.max_rss_mib for r in runs))
            row["query_rss_over_sample_mib"] = round(row["query_rss_mib"] - baseline)
        if not args.no_eval:
            row.update(evaluate(args.root / name / "_queries.jsonl", package))
        if args.bm25s:
            row.update(bm25s_index(args.root / name))
        rows.append(row)
        print(json.dumps(row), flush=True)
    if baseline is not None:
        print(json.dumps({"sample_query_rss_mib": round(baseline)}))
    print(
        f"(this process: peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MiB)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
