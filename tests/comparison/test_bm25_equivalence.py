"""The pure-Python scorer over the compiled package returns bm25s's own top-10 on SciFact."""

from __future__ import annotations

import pytest

from router.analysis.analyzer import AnalyzerConfig
from router.compile.beir import load_beir
from router.compile.fields import section_fields
from router.compile.indexer import BuildConfig, compile_documents
from router.package.reader import load_package
from router.stages.bm25 import bm25_top_k, term_ids
from tests.common import SHARED_DATA

SCIFACT = SHARED_DATA / "scifact"
TOLERANCE = 1e-4  # bm25s sums float32 impacts; the Worker sums them as float64


@pytest.mark.skipif(not SCIFACT.is_dir(), reason=f"SciFact not found at {SCIFACT}")
def test_top10_ids_and_scores_equal_bm25s_on_scifact() -> None:
    import bm25s
    import numpy as np

    collection = load_beir(SCIFACT)
    # per-field layout: the body block alone is plain BM25 over the abstracts
    config = BuildConfig(analyzer=AnalyzerConfig(language="english"), scoring="fields")
    compiled = compile_documents(collection.documents, config)
    files = compiled.files()
    package = load_package(files["manifest.json"], files.__getitem__)

    corpus_tokens = [
        package.analyzer.terms(section_fields(doc, doc.sections[0], True)["body"])
        for doc in collection.documents
    ]
    reference = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    reference.index(corpus_tokens, show_progress=False)

    compared = 0
    for text in collection.queries.values():
        tokens = package.analyzer.terms(text)
        ours = bm25_top_k(package.blocks["body"], term_ids(tokens, package.term_ids), 10)
        known = [t for t in tokens if t in reference.vocab_dict]
        if not known:
            assert ours == []
            continue
        scores = reference.get_scores(known)
        order = np.argsort(-scores, kind="stable")[:10]
        ref = [(int(i), float(scores[i])) for i in order if scores[i] > 0]
        assert len(ours) == len(ref)
        for (_, our_score), (_, ref_score) in zip(ours, ref, strict=True):
            assert abs(our_score - ref_score) <= TOLERANCE * max(1.0, ref_score)
        boundary = ref[-1][1]
        must_have = {i for i, s in ref if s > boundary + TOLERANCE}
        assert must_have <= {i for i, _ in ours}
        # same ranking wherever bm25s's scores are not tied
        for rank, (ref_id, ref_score) in enumerate(ref):
            neighbours = [s for _, s in ref if abs(s - ref_score) <= TOLERANCE]
            if len(neighbours) == 1:
                assert ours[rank][0] == ref_id
        compared += 1
    assert compared >= 290
