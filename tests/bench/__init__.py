"""Tests of the benchmark tools under ``bench/`` that other measurements rely on."""
