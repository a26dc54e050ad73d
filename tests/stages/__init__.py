"""Tests of ``router.stages``: each stage as a pure function over plain data."""
