"""What callers of the vector index rely on: Vectorize's ranking, isolation, filters, limits."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from router.adapters.local.vector_index import LocalVectorIndex
from router.errors import InvalidRequestError
from router.ports import VectorMatch, VectorRecord
from router.vectors.metadata_filter import matches, validate_filter


def record(
    vector_id: str, values: list[float], namespace: str | None = None, **metadata: Any
) -> VectorRecord:
    return VectorRecord(id=vector_id, values=values, namespace=namespace, metadata=metadata)


def index_of(*records: VectorRecord, dimensions: int = 3) -> LocalVectorIndex:
    index = LocalVectorIndex(dimensions)
    index.upsert_many(records)
    return index


def query(index: LocalVectorIndex, vector: list[float], **options: Any) -> list[VectorMatch]:
    return asyncio.run(index.query(vector, **options))


def ids(matches_: list[VectorMatch]) -> list[str]:
    return [found.id for found in matches_]


# --- ranking ----------------------------------------------------------------------------------


def test_nearest_neighbours_come_first_with_cosine_scores() -> None:
    index = index_of(
        record("opposite", [-1, 0, 0]),
        record("orthogonal", [0, 1, 0]),
        record("close", [0.8, 0.6, 0]),
        record("same", [1, 0, 0]),
    )
    found = query(index, [1, 0, 0], top_k=4)
    assert ids(found) == ["same", "close", "orthogonal", "opposite"]
    assert [f.score for f in found] == pytest.approx([1.0, 0.8, 0.0, -1.0], abs=1e-6)


def test_top_k_limits_the_number_of_matches() -> None:
    index = index_of(*(record(f"v{i}", [1, i, 0]) for i in range(10)))
    assert ids(query(index, [1, 0, 0], top_k=3)) == ["v0", "v1", "v2"]


def test_score_ignores_magnitude_and_ties_break_by_id() -> None:
    index = index_of(
        record("b-long", [10, 0, 0]), record("c-other", [0, 0, 1]), record("a-short", [0.5, 0, 0])
    )
    found = query(index, [3, 0, 0], top_k=3)
    assert ids(found) == ["a-short", "b-long", "c-other"]
    assert found[0].score == pytest.approx(1.0) and found[1].score == pytest.approx(1.0)


def test_ties_at_the_cut_are_resolved_by_id_not_insertion_order() -> None:
    index = index_of(*(record(name, [0, 1, 0]) for name in ["d", "b", "c", "a"]))
    assert ids(query(index, [0, 1, 0], top_k=2)) == ["a", "b"]


def test_empty_index_and_unknown_namespace_return_nothing() -> None:
    assert query(LocalVectorIndex(3), [1, 0, 0]) == []
    index = index_of(record("x", [1, 0, 0], namespace="tenant-a"))
    assert query(index, [1, 0, 0], namespace="tenant-z") == []


def test_values_and_metadata_only_when_asked_for() -> None:
    index = index_of(record("x", [1.5, -2.0, 0.25], kind="faq", tags={"lang": "pt"}))
    bare = query(index, [1, 0, 0])[0]
    assert bare.values is None and bare.metadata is None
    full = query(index, [1, 0, 0], return_values=True, return_metadata=True)[0]
    assert full.values == [1.5, -2.0, 0.25]
    assert full.metadata == {"kind": "faq", "tags": {"lang": "pt"}}


def test_returned_and_upserted_metadata_are_copies() -> None:
    metadata: dict[str, Any] = {"kind": "faq"}
    index = index_of(VectorRecord(id="x", values=[1, 0, 0], metadata=metadata))
    metadata["kind"] = "changed by caller"
    first = query(index, [1, 0, 0], return_metadata=True)[0]
    assert first.metadata == {"kind": "faq"}
    assert first.metadata is not None
    first.metadata["kind"] = "changed by reader"
    assert query(index, [1, 0, 0], return_metadata=True)[0].metadata == {"kind": "faq"}


# --- namespaces -------------------------------------------------------------------------------


def tenants() -> LocalVectorIndex:
    return index_of(
        record("a-1", [0.6, 0.8, 0], namespace="tenant-a"),
        record("a-2", [0, 1, 0], namespace="tenant-a"),
        record("b-1", [1, 0, 0], namespace="tenant-b"),
        record("shared", [0.9, 0.1, 0]),
    )


def test_a_namespace_query_never_returns_another_tenants_vectors() -> None:
    found = query(tenants(), [1, 0, 0], top_k=10, namespace="tenant-a")
    assert ids(found) == ["a-1", "a-2"]
    assert {f.namespace for f in found} == {"tenant-a"}


def test_query_without_namespace_searches_every_vector() -> None:
    found = query(tenants(), [1, 0, 0], top_k=10)
    assert ids(found) == ["b-1", "shared", "a-1", "a-2"]
    assert [f.namespace for f in found] == ["tenant-b", None, "tenant-a", "tenant-a"]


# --- upsert and delete ------------------------------------------------------------------------


def test_upsert_replaces_an_existing_id() -> None:
    index = index_of(record("x", [1, 0, 0], kind="old"), record("y", [0, 1, 0]))
    count = asyncio.run(index.upsert([record("x", [0, 0, 1], kind="new")]))
    assert count == 1 and index.size == 2
    found = query(index, [0, 0, 1], top_k=1, return_metadata=True, return_values=True)[0]
    assert (found.id, found.metadata, found.values) == ("x", {"kind": "new"}, [0.0, 0.0, 1.0])


def test_upsert_of_an_existing_id_moves_it_to_the_new_namespace() -> None:
    index = index_of(record("x", [1, 0, 0], namespace="tenant-a"))
    index.upsert_many([record("x", [1, 0, 0], namespace="tenant-b")])
    assert index.size == 1
    assert query(index, [1, 0, 0], namespace="tenant-a") == []
    assert ids(query(index, [1, 0, 0], namespace="tenant-b")) == ["x"]


def test_last_duplicate_in_one_batch_wins() -> None:
    index = index_of(record("x", [1, 0, 0]), record("x", [0, 1, 0]))
    assert index.size == 1
    assert query(index, [0, 1, 0], return_values=True)[0].values == [0.0, 1.0, 0.0]


def test_delete_by_ids_counts_only_existing_ids_and_keeps_the_rest_intact() -> None:
    index = index_of(
        record("a", [1, 0, 0], n=1), record("b", [0, 1, 0], n=2), record("c", [0, 0, 1], n=3)
    )
    assert asyncio.run(index.delete_by_ids(["a", "missing", "a"])) == 1
    assert index.size == 2
    found = query(index, [1, 1, 1], top_k=10, return_values=True, return_metadata=True)
    assert sorted((f.id, tuple(f.values or []), (f.metadata or {})["n"]) for f in found) == [
        ("b", (0.0, 1.0, 0.0), 2),
        ("c", (0.0, 0.0, 1.0), 3),
    ]
    assert asyncio.run(index.delete_by_ids(["a"])) == 0


def test_a_deleted_id_can_be_upserted_again() -> None:
    index = index_of(record("a", [1, 0, 0], namespace="t"))
    asyncio.run(index.delete_by_ids(["a"]))
    index.upsert_many([record("a", [0, 1, 0], namespace="t")])
    assert ids(query(index, [0, 1, 0], namespace="t")) == ["a"]


def test_many_upserts_grow_the_index() -> None:
    index = index_of(*(record(f"v{i:03}", [1, i / 100, 0]) for i in range(200)))
    assert index.size == 200
    assert ids(query(index, [1, 0, 0], top_k=2)) == ["v000", "v001"]


# --- limits -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"top_k": 101}, "100"),
        ({"top_k": 0}, "between 1 and 100"),
        ({"top_k": 21, "return_metadata": True}, "20"),
        ({"top_k": 21, "return_values": True}, "20"),
    ],
)
def test_top_k_caps_are_enforced(options: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message) as caught:
        query(tenants(), [1, 0, 0], **options)
    assert caught.value.code == "invalid_request" and caught.value.http_status == 400


@pytest.mark.parametrize(
    "options",
    [
        {"top_k": 100},
        {"top_k": 21},
        {"top_k": 20, "return_metadata": True},
        {"top_k": 20, "return_values": True, "return_metadata": True},
    ],
)
def test_top_k_within_the_caps_is_accepted(options: dict[str, Any]) -> None:
    assert len(query(tenants(), [1, 0, 0], **options)) == 4


def test_query_vector_of_the_wrong_dimension_is_rejected() -> None:
    with pytest.raises(InvalidRequestError, match="dimensions"):
        query(tenants(), [1, 0])


def test_upsert_of_the_wrong_dimension_rejects_the_whole_batch() -> None:
    index = LocalVectorIndex(3)
    with pytest.raises(InvalidRequestError, match="dimensions"):
        asyncio.run(index.upsert([record("ok", [1, 0, 0]), record("bad", [1, 0, 0, 0])]))
    assert index.size == 0


@pytest.mark.parametrize(
    "bad",
    [
        record("", [1, 0, 0]),
        record("é" * 33, [1, 0, 0]),  # 33 characters, 66 bytes
        record("x", [1, 0, 0], namespace="n" * 65),
        record("x", [1, 0, 0], namespace=""),
        record("x", [float("nan"), 0, 0]),
        record("x", [1e39, 0, 0]),  # not representable as float32
        record("x", [1, 0, 0], blob="z" * (10 * 1024)),
    ],
)
def test_invalid_records_are_rejected(bad: VectorRecord) -> None:
    with pytest.raises(InvalidRequestError):
        LocalVectorIndex(3).upsert_many([bad])


def test_ids_and_namespaces_of_exactly_64_bytes_are_accepted() -> None:
    index = index_of(record("i" * 64, [1, 0, 0], namespace="n" * 64))
    assert ids(query(index, [1, 0, 0], namespace="n" * 64)) == ["i" * 64]


def test_delete_by_ids_rejects_a_bare_string() -> None:
    with pytest.raises(InvalidRequestError):
        asyncio.run(tenants().delete_by_ids("a-1"))


# --- filtering through the index --------------------------------------------------------------


def test_filter_is_applied_before_top_k() -> None:
    near = [record(f"doc-{i}", [1, i / 10, 0], kind="doc") for i in range(5)]
    far = [record(f"faq-{i}", [0, 1, i / 10], kind="faq") for i in range(3)]
    index = index_of(*near, *far)
    found = query(index, [1, 0, 0], top_k=3, filter={"kind": "faq"})
    assert ids(found) == ["faq-0", "faq-1", "faq-2"]


def test_filter_and_namespace_combine() -> None:
    index = index_of(
        record("a-doc", [1, 0, 0], namespace="tenant-a", kind="doc"),
        record("a-faq", [0, 1, 0], namespace="tenant-a", kind="faq"),
        record("b-faq", [1, 0, 0], namespace="tenant-b", kind="faq"),
    )
    found = query(index, [1, 0, 0], namespace="tenant-a", filter={"kind": {"$eq": "faq"}})
    assert ids(found) == ["a-faq"]


def test_nested_and_range_filters_through_the_index() -> None:
    index = index_of(
        record("old", [1, 0, 0], doc={"year": 2019}),
        record("new", [1, 0.1, 0], doc={"year": 2024}),
        record("none", [1, 0.2, 0]),
    )
    found = query(index, [1, 0, 0], top_k=5, filter={"doc.year": {"$gte": 2020, "$lt": 2030}})
    assert ids(found) == ["new"]


@pytest.mark.parametrize(
    ("bad_filter", "message"),
    [
        ({"kind": {"$regex": "fa.*"}}, r"\$regex"),
        ({"kind": {"$in": []}}, "non-empty"),
    ],
)
def test_invalid_filter_fails_the_query(bad_filter: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        query(tenants(), [1, 0, 0], filter=bad_filter)


# --- filter semantics -------------------------------------------------------------------------

METADATA = {"n": 5, "price": 9.5, "flag": True, "nothing": None, "s": "m", "doc": {"lang": "pt"}}


@pytest.mark.parametrize(
    ("filter_", "expected"),
    [
        # implicit and explicit $eq
        ({"s": "m"}, True),
        ({"s": "x"}, False),
        ({"s": {"$eq": "m"}}, True),
        ({"absent": "m"}, False),
        ({"n": 5.0}, True),
        ({"flag": True}, True),
        ({"flag": 1}, False),
        ({"n": True}, False),
        ({"n": "5"}, False),
        ({"doc": "pt"}, False),
        # null is a value, distinct from a missing field
        ({"nothing": None}, True),
        ({"nothing": {"$eq": None}}, True),
        ({"absent": None}, False),
        ({"n": None}, False),
        # $ne matches a missing field
        ({"s": {"$ne": "x"}}, True),
        ({"s": {"$ne": "m"}}, False),
        ({"absent": {"$ne": "m"}}, True),
        ({"nothing": {"$ne": None}}, False),
        ({"absent": {"$ne": None}}, True),
        ({"flag": {"$ne": 1}}, True),
        # $in / $nin
        ({"s": {"$in": ["a", "m"]}}, True),
        ({"s": {"$in": ["a", "b"]}}, False),
        ({"absent": {"$in": ["m"]}}, False),
        ({"nothing": {"$in": ["a", None]}}, True),
        ({"n": {"$in": [True, "5"]}}, False),
        ({"s": {"$nin": ["a", "m"]}}, False),
        ({"s": {"$nin": ["a", "b"]}}, True),
        ({"absent": {"$nin": ["m"]}}, True),
        # ranges on numbers
        ({"n": {"$lt": 5}}, False),
        ({"n": {"$lt": 5.5}}, True),
        ({"n": {"$lte": 5}}, True),
        ({"n": {"$lte": 4}}, False),
        ({"n": {"$gt": 5}}, False),
        ({"n": {"$gt": 4.9}}, True),
        ({"n": {"$gte": 5}}, True),
        ({"n": {"$gte": 6}}, False),
        ({"absent": {"$gte": 0}}, False),
        # ranges on strings, and mismatched types never match
        ({"s": {"$gt": "l"}}, True),
        ({"s": {"$gt": "m"}}, False),
        ({"s": {"$lte": "m"}}, True),
        ({"s": {"$lt": 10}}, False),
        ({"n": {"$gt": "0"}}, False),
        ({"flag": {"$gte": 0}}, False),
        ({"nothing": {"$lt": 1}}, False),
        # combined range is an AND
        ({"price": {"$gte": 9.5, "$lt": 10}}, True),
        ({"price": {"$gt": 9.5, "$lt": 10}}, False),
        ({"price": {"$gte": 1, "$lte": 9}}, False),
        # nested keys
        ({"doc.lang": "pt"}, True),
        ({"doc.lang": "en"}, False),
        ({"doc.missing": {"$ne": "x"}}, True),
        ({"s.deeper": {"$eq": "m"}}, False),
        ({"s.deeper": {"$nin": ["m"]}}, True),
        # top-level keys are ANDed
        ({"s": "m", "n": {"$gt": 1}}, True),
        ({"s": "m", "n": {"$gt": 7}}, False),
    ],
)
def test_filter_semantics(filter_: dict[str, Any], expected: bool) -> None:
    validate_filter(filter_)
    assert matches(METADATA, filter_) is expected


def test_dotted_key_reads_nested_objects_not_literal_dotted_names() -> None:
    assert matches({"a": {"b": 42}}, {"a.b": 42})
    assert not matches({"a.b": 42}, {"a.b": 42})


@pytest.mark.parametrize(
    ("bad_filter", "message"),
    [
        ({}, "non-empty"),
        ({"kind": {"$regex": "a"}}, r"\$regex"),
        ({"$and": [{"a": 1}]}, r"starts with '\$'"),
        ({"kind": {"$in": []}}, "non-empty list"),
        ({"kind": {"$nin": []}}, "non-empty list"),
        ({"kind": {"$in": "faq"}}, "list"),
        ({"kind": {"$in": [["nested"]]}}, "string, number, boolean or null"),
        ({"kind": {}}, "no operator"),
        ({"kind": ["faq", "doc"]}, "string, number, boolean or null"),
        ({"kind": {"$eq": {"a": 1}}}, "string, number, boolean or null"),
        ({"n": {"$gt": True}}, "number or a string"),
        ({"n": {"$lt": None}}, "number or a string"),
        ({"n": {"$eq": float("nan")}}, "finite"),
        ({"n": {"$eq": 1, "$ne": 2}}, "one operator"),
        ({"n": {"$gt": 1, "$gte": 2}}, "one operator"),
        ({"n": {"$gte": 1, "$lt": "b"}}, "mixes"),
        ({"": 1}, "non-empty strings"),
        ({"a..b": 1}, "empty segment"),
        ({'a"b': 1}, "must not contain"),
        ({"k" * 513: 1}, "512"),
        ({"kind": {"$in": ["x" * 100] * 25}}, "2048"),
    ],
)
def test_malformed_filters_are_rejected(bad_filter: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        validate_filter(bad_filter)


def filter_examples() -> LocalVectorIndex:
    """Four records, same direction (ties rank by id), for the well-formed filter examples."""
    return index_of(
        record(
            "r1", [1, 0, 0], streaming_platform="netflix", someKey=False,
            pandas={"nice": 42}, date="2024-06", n=0, tag="b",
        ),
        record(
            "r2", [1, 0, 0], streaming_platform="hulu", someKey=True,
            pandas={"nice": 42}, date="2025-02", n=3, tag="a",
        ),
        record(
            "r3", [1, 0, 0], streaming_platform="netflix",
            pandas={"nice": 41}, date="2023-12", n=-2, tag=1,
        ),
        record("r4", [1, 0, 0], **{"k" * 512: None}),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("good_filter", "selected"),
    [
        ({"streaming_platform": "netflix"}, ["r1", "r3"]),
        ({"someKey": {"$ne": True}}, ["r1", "r3", "r4"]),  # $ne matches a missing field
        ({"pandas.nice": 42, "someKey": {"$ne": True}}, ["r1"]),
        ({"date": {"$gte": "2024-01", "$lt": "2025-01"}}, ["r1"]),
        ({"n": {"$lte": 3, "$gt": -1.5}}, ["r1", "r2"]),
        ({"tag": {"$nin": ["a", 1, False, None]}}, ["r1", "r4"]),
        ({"k" * 512: None}, ["r4"]),  # an explicit null, not a missing field
    ],
)
def test_well_formed_filters_are_accepted_and_select_their_records(
    good_filter: dict[str, Any], selected: list[str]
) -> None:
    validate_filter(good_filter)
    assert ids(query(filter_examples(), [1, 0, 0], top_k=10, filter=good_filter)) == selected
