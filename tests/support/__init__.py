"""Tests of ``router.support``: what the stages use that is no stage of its own."""
