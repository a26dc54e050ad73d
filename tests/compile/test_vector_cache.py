"""The build-time embedding cache: every text gets its own vector back, whatever happened to
the cache file (interrupted writer, two jobs appending at once)."""

from __future__ import annotations

import multiprocessing
import zlib
from pathlib import Path

import numpy as np

from router.compile.vector_cache import RECORDS_FILE, VectorCache

DIMS = 8


def fake_encode(texts: list[str]) -> np.ndarray:
    """A deterministic 'embedding' that identifies its text: row = hash-seeded values."""
    return np.stack(
        [
            np.random.default_rng(zlib.crc32(t.encode())).random(DIMS, dtype=np.float32)
            for t in texts
        ]
    )


def _writer(root: str, prefix: str, count: int) -> None:
    cache = VectorCache("model", DIMS, Path(root))
    texts = [f"{prefix}-{i}" for i in range(count)]
    for start in range(0, count, 3):  # many small appends interleave with the other process
        cache.embed("passage", texts[start : start + 3], fake_encode, batch_size=1)


def test_cached_vectors_are_returned_in_request_order(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def encode(batch: list[str]) -> np.ndarray:
        calls.append(batch)
        return fake_encode(batch)

    cache = VectorCache("model", DIMS, tmp_path)
    first = cache.embed("passage", ["b", "a", "c"], encode)
    again = VectorCache("model", DIMS, tmp_path).embed("passage", ["c", "a"], encode)
    assert np.array_equal(again, np.stack([first[2], first[1]]))
    assert sum(len(batch) for batch in calls) == 3  # nothing embedded twice


def test_query_and_passage_of_the_same_text_are_distinct(tmp_path: Path) -> None:
    cache = VectorCache("model", DIMS, tmp_path)
    cache.embed("query", ["x"], lambda batch: np.zeros((len(batch), DIMS), np.float32))
    assert cache.get("passage", "x") is None
    assert cache.get("query", "x") is not None


def test_torn_tail_of_a_killed_writer_is_ignored_and_repaired(tmp_path: Path) -> None:
    cache = VectorCache("model", DIMS, tmp_path)
    cache.embed("passage", ["a", "b"], fake_encode)
    path = tmp_path / "model" / RECORDS_FILE
    with path.open("ab") as handle:
        handle.write(b"\x01" * 21)  # half a record
    reopened = VectorCache("model", DIMS, tmp_path)
    assert len(reopened) == 2
    reopened.embed("passage", ["c"], fake_encode)
    final = VectorCache("model", DIMS, tmp_path)
    for text in "abc":
        assert np.array_equal(final.get("passage", text), fake_encode([text])[0])


def test_two_processes_appending_at_once_never_misalign_vectors(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    jobs = [context.Process(target=_writer, args=(str(tmp_path), p, 60)) for p in "xy"]
    for job in jobs:
        job.start()
    for job in jobs:
        job.join(timeout=60)
        assert job.exitcode == 0
    cache = VectorCache("model", DIMS, tmp_path)
    assert len(cache) == 120
    for prefix in "xy":
        for i in range(60):
            text = f"{prefix}-{i}"
            assert np.array_equal(cache.get("passage", text), fake_encode([text])[0]), text


def test_a_cache_sees_rows_another_process_appended_after_it_opened(tmp_path: Path) -> None:
    reader = VectorCache("model", DIMS, tmp_path)
    VectorCache("model", DIMS, tmp_path).embed("passage", ["late"], fake_encode)
    out = reader.embed("passage", ["late"], lambda batch: (_ for _ in ()).throw(AssertionError))
    assert np.array_equal(out[0], fake_encode(["late"])[0])
