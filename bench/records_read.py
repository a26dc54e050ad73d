"""D1 rows or R2 chunks for document records (issue 11, ADR 0010 §3): measured inside the Worker.

    python bench/records_read.py [--package DIR] [--docs 10 30] [--trials 40]

What a response reads after fusion is the records of a few dozen documents (the shown, quoted
and fact-candidate ones and those its trace names). This bench times the two ways to read them
from the real Worker runtime (Pyodide 314 in Node, tests/pyodide's host, wrangler's local R2 and
D1 through the Worker's bindings), on the same records:

- **R2 chunks** (what format 3 does): the record chunks holding the documents, fetched
  concurrently through the R2 binding, each verified (its content name) and its records decoded;
- **D1 rows**: one ``SELECT record FROM bench_records WHERE version = ? AND doc_index IN (…)``
  over a table holding one JSON record per document (created and filled here, as a publish
  would), decoded.

Each trial draws ``--docs`` random documents of the shared partition; the first trial of each
method reads cold. Reported: p50 / p95 ms per trial and bytes read, side by side. The local
simulators have no network between the isolate and the stores, so the figures compare the
per-call costs inside the isolate (FFI, copies, hashing, decoding), not production round trips:
those are discussed in docs/adr/0010 with the limits that decide them (one D1 query vs. several
concurrent R2 gets per response, six simultaneous connections per invocation).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from tests.pyodide.client import PyodideHost, run_wrangler  # noqa: E402

from router.compile.build import build_knowledge, write_package  # noqa: E402
from router.package.format.bundle import BUNDLE_NAME, decode_bundle  # noqa: E402
from router.package.format.texts import decode_text_index  # noqa: E402
from router.package.stores.records import RECORDS_INDEX_NAME, RECORDS_STEM  # noqa: E402
from router.package.version.manifest import Manifest  # noqa: E402

# Runs inside Pyodide (``env`` is the Worker's env): fills the D1 table from the R2 chunks.
_FILL = """
import json
from router.adapters.cloudflare.d1 import run_batches
from router.adapters.cloudflare.jsconv import binding
from router.adapters.cloudflare.r2 import R2BlobStore
from router.package.format.bundle import decode_bundle
from router.package.format.texts import decode_text_index
from router.package.version.layout import package_key
store = R2BlobStore(binding(env, "KNOWLEDGE_BUCKET"))
bundle = decode_bundle(await store.get(package_key(VERSION, "shared.partition.bin")),
                       "shared.partition.bin")
index = decode_text_index(bundle["records.bin"], "records")
db = binding(env, "KNOWLEDGE_DB")
await run_batches(db, [(
    "CREATE TABLE IF NOT EXISTS bench_records (version TEXT NOT NULL, doc_index INTEGER NOT NULL,"
    " record TEXT NOT NULL, PRIMARY KEY (version, doc_index))", [])])
rows = []
for chunk, name in enumerate(index.chunk_names()):
    blob = await store.get(package_key(VERSION, "shared." + name))
    for doc in range(index.first[chunk], index.first[chunk + 1]):
        rows.append(("INSERT OR REPLACE INTO bench_records VALUES (?, ?, ?)",
                     [VERSION, doc, index.text(doc, blob)]))
await run_batches(db, rows)
result = len(rows)
"""

# Runs inside Pyodide: one trial of each method, returns ms and bytes.
_TRIAL = """
import asyncio, json, time
from router.adapters.cloudflare.jsconv import binding, sql_params, to_py
from router.adapters.cloudflare.r2 import R2BlobStore
from router.package.version.content_names import verify_named
from router.package.format.texts import decode_text_index
from router.package.version.layout import package_key
store = R2BlobStore(binding(env, "KNOWLEDGE_BUCKET"))
index = decode_text_index(INDEX_BLOB, "records")
out = {}
if METHOD == "r2":
    started = time.perf_counter()
    chunks = sorted({index.chunk_of(d) for d in DOCS})
    names = [index.chunk_names()[c] for c in chunks]
    blobs = await asyncio.gather(*(store.get(package_key(VERSION, "shared." + n)) for n in names))
    by_chunk = {}
    for chunk, name, blob in zip(chunks, names, blobs):
        verify_named(name, blob)
        by_chunk[chunk] = blob
    records = [json.loads(index.text(d, by_chunk[index.chunk_of(d)])) for d in DOCS]
    out = {"ms": (time.perf_counter() - started) * 1000, "bytes": sum(map(len, blobs)),
           "calls": len(names)}
else:
    started = time.perf_counter()
    marks = ",".join("?" * len(DOCS))
    sql = ("SELECT doc_index, record FROM bench_records WHERE version = ? AND doc_index IN ("
           + marks + ")")
    db = binding(env, "KNOWLEDGE_DB")
    found = to_py(await db.prepare(sql).bind(*sql_params([VERSION, *DOCS])).all())
    rows = found["results"]
    records = [json.loads(row["record"]) for row in rows]
    out = {"ms": (time.perf_counter() - started) * 1000,
           "bytes": sum(len(row["record"].encode()) for row in rows), "calls": 1}
assert len(records) == len(DOCS)
result = out
"""


def _package(folder: Path | None, work: Path) -> Path:
    if folder is not None:
        return folder
    built = build_knowledge(ROOT / "knowledge")
    return write_package(built.package, work / "package")


def _code(template: str, **values: object) -> str:
    header = "".join(f"{name} = {value!r}\n" for name, value in values.items())
    return header + template


def _summary(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered):7.2f} / {p95:7.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--package", type=Path, help="a `kr build --out` folder (default: sample)")
    parser.add_argument("--docs", type=int, nargs="+", default=[10, 30])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    random.seed(args.seed)
    with tempfile.TemporaryDirectory(prefix="kr-records-") as tmp:
        work = Path(tmp)
        folder = _package(args.package, work)
        manifest = Manifest.from_bytes((folder / "manifest.json").read_bytes())
        version = manifest.knowledge_version
        bundle = decode_bundle((folder / f"shared.{BUNDLE_NAME}").read_bytes(), BUNDLE_NAME)
        index_blob = bundle[RECORDS_INDEX_NAME]
        documents = decode_text_index(index_blob, RECORDS_STEM).sections
        state = work / "state"
        apply = ["d1", "migrations", "apply", "KNOWLEDGE_DB", "--local", "--persist-to"]
        run_wrangler([*apply, str(state), "--env="])
        with PyodideHost(persist_to=state, log=work / "host.log") as host:
            host.publish(folder)
            filled = host.python(_code(_FILL, VERSION=version))
            print(f"{version}: {documents:,} shared documents, {filled:,} rows in D1")
            print("docs | method | p50 / p95 ms | KiB read p50 | calls p50 | cold ms")
            for count in args.docs:
                for method in ("r2", "d1"):
                    trials = []
                    for _ in range(args.trials):
                        docs = sorted(random.sample(range(documents), min(count, documents)))
                        code = _code(
                            _TRIAL,
                            VERSION=version,
                            METHOD=method,
                            DOCS=docs,
                            INDEX_BLOB=index_blob,
                        )
                        trials.append(host.python(code))
                    ms = [t["ms"] for t in trials]
                    kib = statistics.median(t["bytes"] for t in trials) / 1024
                    calls = statistics.median(t["calls"] for t in trials)
                    print(
                        f"{count:4d} | {method} | {_summary(ms[1:])} | {kib:8.1f} | "
                        f"{calls:5.0f} | {ms[0]:.2f}"
                    )
            print(json.dumps({"version": version, "documents": documents}))


if __name__ == "__main__":
    main()
