"""The house's structure, checked on the code: no import circle in ``src/`` (TYPE_CHECKING
imports counted too), the result types and the state above no stage, the core sans-I/O.

Why a test: circles came back twice as stages grew (a stage's result typed on ``QueryState``,
the state importing the stage back); a newcomer's next stage should fail here, not in review."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.common import ROOT

SRC = ROOT / "src"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in SRC.rglob("*.py")}


def _imports(path: Path, known: set[str]) -> set[str]:
    """Every module of ``src/`` that ``path`` imports, wherever the import is written."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module in known:
                found.add(node.module)
            found.update(
                f"{node.module}.{alias.name}"
                for alias in node.names
                if f"{node.module}.{alias.name}" in known
            )
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(path, known) - {name} for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_src_has_no_import_circle() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_check_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_results_and_state_import_no_stage_or_pipeline() -> None:
    graph = _graph()
    for leaf in ("router.results", "router.state"):
        upward = {m for m in graph[leaf] if m.startswith(("router.stages", "router.pipeline"))}
        assert upward == set(), leaf


def test_ranking_and_package_import_no_stage() -> None:
    graph = _graph()
    for name, targets in graph.items():
        if name.startswith(("router.ranking", "router.package", "router.support")):
            assert not {t for t in targets if t.startswith("router.stages")}, name


def test_the_core_is_sans_io() -> None:
    io = {"js", "workers", "sqlite3", "httpx"}
    for path in (SRC / "router").rglob("*.py"):
        if "adapters" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = {node.module.split(".")[0]}
            else:
                continue
            assert not names & io, f"{path.relative_to(ROOT)} imports {names & io}"


def _state_writes(path: Path) -> list[str]:
    """``state.<field> = …``, ``+=`` and in-place ``state.<field>.update/append/…`` in a file."""
    writes = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"update", "append", "extend", "pop", "clear", "setdefault"}
        ):
            targets = [node.func.value]
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "state"
                and target.attr not in {"trace", "unreadable"}  # the logs every stage writes
            ):
                writes.append(f"{path.name}:{getattr(node, 'lineno', 0)} state.{target.attr}")
    return writes


def test_stages_write_no_field_of_the_state() -> None:
    """A stage returns what it found and the reads it made; the pipeline stores them."""
    writes = [w for path in (SRC / "router" / "stages").glob("*.py") for w in _state_writes(path)]
    assert writes == []
    pipeline = _state_writes(SRC / "router" / "pipeline.py")
    assert any("state.package" in w for w in pipeline)  # the check sees a real write


def test_formats_import_no_store_or_view() -> None:
    """A codec (``package/format/``) knows bytes only; the readers (``package/stores/``) and the
    view build on it, never the other way round."""
    graph = _graph()
    above = ("router.package.stores", "router.package.view", "router.package.reader")
    for name, targets in graph.items():
        if name.startswith("router.package.format"):
            assert not {t for t in targets if t.startswith(above)}, name
