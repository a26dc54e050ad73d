"""What the fault tests share: a clock they move, and the ways a local backend file is damaged
(locked by another writer, truncated, overwritten with garbage, replaced by a folder) and then
repaired."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["DAMAGES", "Clock", "damage", "damaged", "locked"]

DAMAGES = ("truncated", "garbage", "unopenable")
"""How :func:`damage` breaks a file (a lock is :func:`locked`)."""


class Clock:
    """A clock the test moves (monotonic or wall seconds, as the object under test expects)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def damage(path: Path, how: str) -> None:
    """Break ``path``: cut it to 100 bytes, overwrite it with garbage, or put a folder there."""
    if how == "truncated":
        path.write_bytes(path.read_bytes()[:100])
    elif how == "garbage":
        path.write_bytes(b"\x00not a database" * 400)
    elif how == "unopenable":
        path.unlink()
        path.mkdir()  # a folder where the file was: every open fails
    else:
        raise ValueError(how)


@contextmanager
def damaged(path: Path, how: str) -> Iterator[None]:
    """``path`` damaged (or locked) inside the block, restored byte for byte after it."""
    if how == "locked":
        with locked(path):
            yield
        return
    original = path.read_bytes()
    damage(path, how)
    try:
        yield
    finally:
        if path.is_dir():
            shutil.rmtree(path)
        path.write_bytes(original)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Another connection holds ``path`` under an exclusive lock (a long write elsewhere)."""
    lock = sqlite3.connect(path, timeout=0)
    lock.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        lock.rollback()
        lock.close()
