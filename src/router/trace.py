"""The per-query trace: what each stage found and how long it took, and the latency budget.

Why one object: the trace is the explanation a caller gets with every answer (PRD §39), and the
budget (PRD §21) is measured on the same clock, so a stage that starts after the budget is spent
is skipped and the skip is recorded where the caller reads the rest. A long stage (typo repair,
expansion, keyword phrases, graph walk, the pure BM25 scorer) also asks ``deadline`` between its
steps, stops when the budget is spent and says so (``budget_exceeded`` in its trace, ``latency
in <stage>`` in ``exceeded``). The clock is injected, so tests force a deadline without timing.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

__all__ = ["NO_DEADLINE", "TRACE_TOP_N", "Deadline", "DocRef", "SectionRef", "Trace", "WorkLimit"]

TRACE_TOP_N = 10
"""Candidates a ranking stage lists in the trace (the full lists stay in the state)."""

Deadline = Callable[[], bool]
"""True once the request's latency budget is spent: what a long loop asks between its steps."""


def _never() -> bool:
    return False


NO_DEADLINE: Deadline = _never
"""The deadline that never passes: work done outside a request (benchmarks, a stage's tests)."""


@dataclass
class WorkLimit:
    """Steps one stage may take for one request (a named bound), and its deadline; what it
    spent, and why it stopped: ``truncated`` (the bound) or ``timed_out`` (the deadline, which
    the stage asks with ``expired`` between its steps — never before its first, so a stage
    that starts always does some work and a clock only decides how far it goes)."""

    allowed: int
    deadline: Deadline = NO_DEADLINE
    spent: int = 0
    truncated: bool = False
    timed_out: bool = False

    def take(self, steps: int = 1) -> bool:
        """Whether ``steps`` more may be taken (then counted); False once the bound is reached."""
        if self.truncated or self.spent + steps > self.allowed:
            self.truncated = True
            return False
        self.spent += steps
        return True

    def share(self, steps: int) -> int:
        """How many of ``steps`` may be taken (then counted): all, or the rest of the bound."""
        granted = 0 if self.truncated else min(steps, self.allowed - self.spent)
        if granted < steps:
            self.truncated = True
        self.spent += granted
        return granted

    def expired(self) -> bool:
        """True (and remembered) once the deadline has passed."""
        if not self.timed_out and self.deadline():
            self.timed_out = True
        return self.timed_out

    def report(self, trace: Trace, stage: str) -> dict[str, bool]:
        """The stage's trace flags (empty when nothing stopped it); a timeout is recorded."""
        flags: dict[str, bool] = {}
        if self.truncated:
            flags["truncated"] = True
        if self.timed_out:
            flags["budget_exceeded"] = True
            trace.cut(stage)
        return flags


class SectionRef(int):
    """A view section a stage names in the trace; the response shows its section id. Stages
    run before the records of their sections are read (after fusion), so they record numbers,
    and the response resolves them all at once."""

    __slots__ = ()


class DocRef(int):
    """A view document a stage names in the trace; the response shows its semantic id."""

    __slots__ = ()


def _walk(value: Any, sections: set[int], docs: set[int]) -> None:
    if isinstance(value, SectionRef):
        sections.add(int(value))
    elif isinstance(value, DocRef):
        docs.add(int(value))
    elif isinstance(value, dict):
        for item in value.values():
            _walk(item, sections, docs)
    elif isinstance(value, list | tuple):
        for item in value:
            _walk(item, sections, docs)


def _resolve(
    value: Any, section_id: Callable[[int], str | None], doc_id: Callable[[int], str | None]
) -> Any:
    if isinstance(value, SectionRef):
        return section_id(int(value))
    if isinstance(value, DocRef):
        return doc_id(int(value))
    if isinstance(value, dict):
        return {key: _resolve(item, section_id, doc_id) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_resolve(item, section_id, doc_id) for item in value]
    return value


@dataclass
class Trace:
    """Stage name → details (with ``ms``), in the order the stages ran."""

    clock: Callable[[], float]
    started: float
    budget_ms: float
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    exceeded: list[str] = field(default_factory=list)
    _last: float = 0.0

    def __post_init__(self) -> None:
        self._last = self.clock()

    def stage(self, name: str, **details: Any) -> None:
        """Record a finished stage; its ``ms`` is the time since the previous record."""
        now = self.clock()
        self.stages[name] = {"ms": round((now - self._last) * 1000, 3), **details}
        self._last = now

    def skip(self, name: str, reason: str) -> None:
        self.stages[name] = {"ms": 0.0, "skipped": reason}

    def ran(self, name: str) -> bool:
        """True when ``name`` was recorded and not skipped."""
        return name in self.stages and "skipped" not in self.stages[name]

    def elapsed_ms(self) -> float:
        return round((self.clock() - self.started) * 1000, 3)

    def over_budget(self, stage: str) -> bool:
        """True (and recorded) when the latency budget is spent before ``stage``."""
        if (self.clock() - self.started) * 1000 <= self.budget_ms:
            return False
        self.exceeded.append(f"latency before {stage}")
        return True

    def deadline(self) -> bool:
        """True when the latency budget is spent (nothing recorded: ``cut`` records the stop)."""
        return (self.clock() - self.started) * 1000 > self.budget_ms

    def cut(self, stage: str) -> None:
        """Record that ``stage`` stopped early because the latency budget was spent."""
        note = f"latency in {stage}"
        if note not in self.exceeded:
            self.exceeded.append(note)

    def references(self, skip: Collection[str] = ()) -> tuple[set[int], set[int]]:
        """(sections, documents) the stages named so far, but for the stages in ``skip``."""
        sections: set[int] = set()
        docs: set[int] = set()
        _walk({k: v for k, v in self.stages.items() if k not in skip}, sections, docs)
        return sections, docs

    def resolved(
        self, section_id: Callable[[int], str | None], doc_id: Callable[[int], str | None]
    ) -> dict[str, dict[str, Any]]:
        """The stages with every reference replaced by the id it names."""
        resolved: dict[str, dict[str, Any]] = _resolve(self.stages, section_id, doc_id)
        return resolved
