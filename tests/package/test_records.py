"""Documents leave the resident set: columns for the filters, records fetched per response."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import random

import pytest

from router.compile.build import BuildResult
from router.contract import QueryRequest
from router.errors import PackageFormatError
from router.knowledge.model import Document, Section
from router.package.format.doc_columns import decode_columns, encode_columns
from router.package.reader import load_package
from router.pipeline import CascadeServices, run_cascade, run_query
from router.results import Visibility
from router.stages.filters import visible_documents, visible_sections
from tests.common import ALFA, TODAY, catalog_of, with_all_records

DAYS = ["1999-01-01", "2024-12-31", "2025-06-30", TODAY, "2031-01-01"]


def _doc(index: int, **fields: object) -> Document:
    sections = [Section(f"d{index}#s{s}", "h", 2, "", 1) for s in range(index % 3 + 1)]
    return Document(semantic_id=f"d{index}", title="t", path="p", sections=sections, **fields)  # type: ignore[arg-type]


def test_columns_round_trip_and_answer_the_filters_as_the_documents_do() -> None:
    docs = [
        _doc(0),
        _doc(1, valid_from="2025-01-01", valid_until="2025-12-31", trust="draft"),
        _doc(2, status="archived", scope={"page": "Permissões", "tab": "Componentes"}),
        _doc(3, trust="deprecated", valid_until="2024-12-31", scope={"page": "permissoes"}),
        _doc(4, valid_from="2026-06-15"),
    ]
    columns = decode_columns(encode_columns(docs))
    assert columns.documents == 5 and columns.sections == sum(len(d.sections) for d in docs)
    assert list(columns.first) == [0, 1, 3, 6, 7, 9]
    assert [columns.trust(i) for i in range(5)] == [d.trust for d in docs]
    assert columns.in_scope("permissoes", None) == [2, 3]
    assert columns.in_scope("permissoes", "componentes") == [2] and not columns.in_scope("x", None)
    for day in DAYS:
        for deprecated in (False, True):
            rule = Visibility(None, day, deprecated)
            day_number = dt.date.fromisoformat(day).toordinal()
            assert list(columns.visible(day_number, deprecated)) == [rule.admits(d) for d in docs]


@pytest.mark.parametrize("span_years", [1, 150, 600])
def test_narrow_and_wide_day_columns_filter_like_the_documents(span_years: int) -> None:
    """Random validity windows over 1, 150 and 600 years (2-byte days, then 4-byte ones), and
    days before, inside and after all of them: the columns admit what the documents do."""
    rng = random.Random(span_years)
    start = dt.date(1900, 1, 1).toordinal()
    span = 365 * span_years

    def day(offset: int) -> str:
        return dt.date.fromordinal(start + offset).isoformat()

    docs = []
    for index in range(300):
        low, high = sorted(rng.randrange(span) for _ in range(2))
        bounds: dict[str, object] = {"valid_from": day(low)} if rng.random() < 0.7 else {}
        if rng.random() < 0.7:
            bounds["valid_until"] = day(high)
        if rng.random() < 0.1:
            bounds["status"] = "deprecated"
        docs.append(_doc(index, **bounds, scope={"page": f"p{index % 7}"}))
    columns = decode_columns(encode_columns(docs))
    asked = [day(rng.randrange(-400, span + 400)) for _ in range(120)] + [day(-9000), day(span * 2)]
    asked += [d.valid_from or day(0) for d in docs[:40]] + [
        d.valid_until or day(0) for d in docs[:40]
    ]
    for when in asked:
        for deprecated in (False, True):
            rule = Visibility(None, when, deprecated)
            admitted = list(columns.visible(dt.date.fromisoformat(when).toordinal(), deprecated))
            assert admitted == [rule.admits(d) for d in docs], when
    assert columns.in_scope("p3", None) == [i for i in range(300) if i % 7 == 3]


def test_a_malformed_docs_file_is_refused() -> None:
    blob = encode_columns([_doc(0), _doc(1)])
    for broken in (blob[:12], b"KRDOCS99" + blob[8:], blob + b"\0", blob[:-2] + b"!]"):
        with pytest.raises(PackageFormatError):
            decode_columns(broken)


def test_visibility_masks_equal_the_document_rule_in_every_view(built: BuildResult) -> None:
    files = built.package.files()
    package = load_package(files["manifest.json"], files.__getitem__)
    for tenant in (None, ALFA):
        view = with_all_records(package.view(tenant))
        documents = list(view.documents)
        assert {d.tenant for d in documents} <= {"*", tenant}
        for day in DAYS:
            for deprecated in (False, True):
                rule = Visibility(tenant, day, deprecated)
                docs = visible_documents(view, rule)
                sections = visible_sections(view, rule)
                admitted = [rule.admits(d) for d in documents]
                assert [d in docs for d in range(view.doc_count)] == admitted
                expected = [admitted[view.section_doc[s]] for s in range(view.num_sections)]
                if sections is None:
                    assert all(expected)
                else:
                    assert [s in sections for s in range(view.num_sections)] == expected


def test_loading_reads_no_record_and_a_query_reads_only_the_records_it_shows(
    built: BuildResult,
) -> None:
    files = built.package.files()
    fetched: list[str] = []

    async def fetch_chunk(name: str) -> bytes:
        fetched.append(name)
        return files[name]

    def fetch(name: str) -> bytes:
        assert ".records-" not in name, "a record chunk was read at load"
        return files[name]

    package = load_package(files["manifest.json"], fetch, fetch_chunk=fetch_chunk)
    assert not fetched
    response = run_query(package, QueryRequest(query="validade da APR"), today=TODAY)
    records = [name for name in fetched if ".records-" in name]
    texts = [name for name in fetched if ".texts-" in name]
    stages = response.trace["stages"]
    early, trace = stages["early_records"], stages["records"]
    all_records = [name for name in files if ".records-" in name]
    assert 0 < len(records) < len(all_records)
    read = (early, trace, stages["texts"])
    assert sum(s["chunks_fetched"] for s in read) == len(records) + len(texts)
    assert early["round_trips"] == 1 and early["bytes_fetched"] > 0  # beside the graph's edges
    assert early["documents"] + trace["documents"] <= 10 * 5  # shown, quoted, facts, trace names
    shown = {r.doc_id for r in response.results}
    catalog = catalog_of(package)
    assert shown <= {d.semantic_id for d in catalog.documents} and response.results
    quoted = run_query(package, QueryRequest(query="O que é APR?"), today=TODAY).trace["stages"]
    assert quoted["early_records"]["texts"] > 0 and quoted["early_records"]["round_trips"] == 1
    assert quoted["texts"]["round_trips"] == 0  # the quoted texts came with the records
    again = run_query(package, QueryRequest(query="validade da APR"), today=TODAY)
    stages = again.trace["stages"]
    assert stages["early_records"]["chunks_fetched"] == stages["records"]["chunks_fetched"] == 0
    assert again.results == response.results


def test_trace_references_resolve_to_the_ids_of_the_ranked_sections(built: BuildResult) -> None:
    files = built.package.files()
    package = load_package(files["manifest.json"], files.__getitem__)
    response = run_query(package, QueryRequest(query="apr.validity"), today=TODAY)
    stages = response.trace["stages"]
    assert stages["exact"]["hits"][0]["doc"] == response.results[0].doc_id == "apr.validity"
    ranking = [row[0] for row in stages["fusion"]["ranking"]]
    assert ranking == [r.section_id for r in response.results]
    assert all(isinstance(row[0], str) for row in stages["bm25"]["candidates"])


def test_unreadable_records_make_the_query_abstain_and_never_fail(built: BuildResult) -> None:
    files = dict(built.package.files())
    for name in [n for n in files if ".records-" in n]:
        files[name] = files[name][:-1] + b"?"
    package = load_package(files["manifest.json"], files.__getitem__)
    request = QueryRequest(query="O que é APR?")
    response = asyncio.run(run_cascade(package, request, None, CascadeServices(), TODAY))
    assert response.abstained and response.results == [] and response.citations == []
    assert "could not be read" in (response.abstention_reason or "")
    assert response.trace["stages"]["records"]["error"] == "package_integrity"
    assert response.trace["stages"]["bm25"]["candidates"][0][0] is None  # no id to show


def test_a_view_refuses_to_read_a_record_the_query_did_not_load(built: BuildResult) -> None:
    files = built.package.files()
    view = load_package(files["manifest.json"], files.__getitem__).view(None)
    with pytest.raises(LookupError):
        view.documents[0]
    loaded = with_all_records(view)
    assert dataclasses.replace(loaded).documents[0].semantic_id
    assert view.loaded == {}  # loading gave a new view; the shared one holds no records
