"""Tests of the ``kr`` CLI: build, query, eval, gate, rollback."""
