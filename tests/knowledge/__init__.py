"""Tests of ``router.knowledge``: the Markdown input contract."""
