"""Tests of ``router.api``: the HTTP app."""
