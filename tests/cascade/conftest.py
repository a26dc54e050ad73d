"""Fixtures of the cascade tests; helpers and constants are in ``common.py``."""

from __future__ import annotations

import pytest

from router.adapters.local.vector_index import LocalVectorIndex
from router.pipeline import CascadeServices
from router.vectors.hash_embedder import HashEmbedder


@pytest.fixture
def vservices(vindex: LocalVectorIndex) -> CascadeServices:
    return CascadeServices(embedder=HashEmbedder(), vector_index=vindex)
