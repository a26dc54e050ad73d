"""Constants and small helpers shared by the test modules: paths, the fixed day, tenant names.

Why a module and not ``conftest.py``: constants are imported (``from tests.common import ...``);
``conftest.py`` holds only fixtures, which pytest injects by name.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "ALFA",
    "BETA",
    "GOLDEN",
    "KNOWLEDGE",
    "MIGRATIONS",
    "ROOT",
    "SHARED_DATA",
    "TODAY",
    "write_doc",
]

ROOT = Path(__file__).resolve().parents[1]
KNOWLEDGE = ROOT / "knowledge"
GOLDEN = ROOT / "eval" / "golden.jsonl"
MIGRATIONS = ROOT / "migrations" / "d1"
SHARED_DATA = ROOT.parent / "shared" / "data"
TODAY = "2026-06-15"  # queries without a date are asked on this day

# The two tenants of the sample knowledge (``knowledge/tenants/``).
ALFA = "construtora-alfa"
BETA = "metalurgica-beta"


def write_doc(folder: Path, name: str, text: str) -> Path:
    """Write one knowledge file (creating its folders) and return its path."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
