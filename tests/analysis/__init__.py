"""Tests of ``router.analysis``: the shared analyzer and the Portuguese sound key."""
