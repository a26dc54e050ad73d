"""Progress and notes on stderr, so stdout stays the command's result (a table or JSON).

Why rich, and only on a terminal: SciFact's 300 queries through the hybrid cascade take a while
and a bar says how long; in a pipe or a CI log an animated bar is noise, so it is left out.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["PROGRESS_MIN_ITEMS", "Advance", "progress_bar", "progress_phases", "say"]

PROGRESS_MIN_ITEMS = 50
"""Runs shorter than this finish before a bar would be worth drawing."""

Advance = Callable[[int], None]


def say(message: str) -> None:
    """A note for the person at the terminal (stderr)."""
    print(message, file=sys.stderr, flush=True)


def _ignore(_: int) -> None:
    return None


@contextmanager
def progress_bar(total: int, description: str) -> Iterator[Advance]:
    """Yields ``advance(n)``; draws a transient rich bar on a terminal for long runs."""
    if total < PROGRESS_MIN_ITEMS or not sys.stderr.isatty():
        yield _ignore
        return
    with _progress("{task.description}", transient=True) as progress:
        task = progress.add_task(description, total=total)

        def advance(count: int) -> None:
            progress.advance(task, count)

        yield advance


@contextmanager
def progress_phases() -> Iterator[Callable[[str, int], Advance]]:
    """Yields ``phase(name, total) -> advance``: a bar per phase of a long command (``kr
    build``: parse, compile, write), drawn on a terminal only, each phase's bar kept on screen
    once done."""
    if not sys.stderr.isatty():
        yield lambda _name, _total: _ignore
        return
    with _progress("{task.description:<8}", transient=False) as progress:

        def phase(name: str, total: int) -> Advance:
            task = progress.add_task(name, total=total)
            return lambda count: progress.advance(task, count)

        yield phase


def _progress(label: str, transient: bool) -> Any:
    """A rich progress display on stderr: label, bar, done/total, elapsed, remaining."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    return Progress(*columns, console=Console(stderr=True), transient=transient)
