"""Tests of ``router.compile``: the build-time embedding cache."""
