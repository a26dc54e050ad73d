"""Tests of ``router.package``: the compiled package format and its integrity checks."""
