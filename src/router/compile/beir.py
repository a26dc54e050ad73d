"""BEIR-layout collections (corpus.jsonl, queries.jsonl, qrels/*.tsv) as documents and judgments.

Why here: benchmarks and the bm25s-equivalence test compile public collections with the same
compiler as the knowledge folders, one section per corpus document (title + text).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

from router.knowledge.model import Document, Section
from router.safety.fields import flag_document

__all__ = ["BeirCollection", "load_beir"]


@dataclass(frozen=True)
class BeirCollection:
    name: str
    documents: list[Document]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def load_beir(
    folder: str | Path, split: str = "test", corpus_file: str = "corpus.jsonl"
) -> BeirCollection:
    base = Path(folder)
    documents = []
    with (base / corpus_file).open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            text = "\n".join(p for p in (row.get("title", ""), row.get("text", "")) if p)
            doc_id = str(row["_id"])
            section = Section(
                section_id=doc_id, heading=row.get("title", ""), level=1, text=text, line=1
            )
            doc = Document(
                semantic_id=doc_id, title=row.get("title", ""), path=doc_id, sections=[section]
            )
            flag_document(doc)  # as the parser does for a knowledge file
            documents.append(doc)
    queries = {}
    with (base / "queries.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            queries[str(row["_id"])] = row["text"]
    qrels: dict[str, dict[str, int]] = {}
    with (base / "qrels" / f"{split}.tsv").open(encoding="utf-8") as handle:
        reader = csv.reader(handle, delimiter="\t")
        next(reader, None)
        for query_id, doc_id, score in reader:
            qrels.setdefault(query_id, {})[doc_id] = int(score)
    return BeirCollection(base.name, documents, {q: queries[q] for q in qrels}, qrels)
