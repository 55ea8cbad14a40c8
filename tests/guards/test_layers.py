"""The package's parts form layers: each part imports only parts below it, never in a cycle.

Every import counts, wherever it is written: at module level, inside a function (a lazy
import is still a dependency) and under ``TYPE_CHECKING``. A part is a top-level module or
subpackage of ``promptflow_resume``; a new one must be placed in ``LAYERS`` below.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

from tests import support

PACKAGE = support.REPO / "promptflow_resume"

#: Top to bottom. A part may import parts in its own layer or below; a cycle is refused
#: even inside one layer.
LAYERS: list[set[str]] = [
    {"__main__", "cli"},
    {"batch"},
    {"api"},
    {"status"},
    {"subworkflows"},
    {"check", "engine", "reconcile", "recovery", "sharing", "detect", "show", "compaction"},
    {"conversation", "events", "recorded"},
    {"worktree"},
    {"tools"},
    {"workflow"},
    {"providers"},
    {"progress"},
    {"chat", "flowfolder"},
    # The ground: records and helpers with no knowledge of runs or workflows.
    {"__init__", "base"},
]


def _part_of(module: str) -> str:
    """``promptflow_resume.tools.edit`` → ``tools``; the package itself → ``__init__``."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    name = parts[1]
    # ``from promptflow_resume import __version__`` imports from the package itself.
    return name if (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").exists() else "__init__"


def _package_of(path: Path) -> str:
    """The dotted package a file's relative imports start from."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return (
        module.removesuffix(".__init__")
        if path.name == "__init__.py"
        else module.rpartition(".")[0]
    )


def imports_in(source: str, package: str) -> set[str]:
    """The package modules ``source`` imports, as dotted names (relative imports resolved)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if node.module is None:
                found.update(f"{target}.{a.name}" for a in node.names)
            else:
                found.add(target)
    return {name for name in found if name.split(".")[0] == PACKAGE.name}


def part_graph() -> dict[str, set[str]]:
    """Each part → the other parts it imports."""
    graph: dict[str, set[str]] = defaultdict(set)
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _part_of(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts))
        graph[source]
        for target in map(
            _part_of, imports_in(path.read_text(encoding="utf-8"), _package_of(path))
        ):
            if target != source:
                graph[source].add(target)
    return dict(graph)


def _layer(part: str) -> int:
    for index, layer in enumerate(LAYERS):
        if part in layer:
            return index
    raise AssertionError(f"part {part!r} is in no layer: add it to LAYERS in {__file__}")


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``[a, b, …, a]``, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_every_part_has_a_layer() -> None:
    for part in part_graph():
        _layer(part)


def test_no_part_imports_a_part_above_it() -> None:
    wrong = [
        f"{source} → {target}"
        for source, targets in sorted(part_graph().items())
        for target in sorted(targets)
        if _layer(target) < _layer(source)
    ]
    assert wrong == []


def test_no_import_cycle_between_parts() -> None:
    assert _cycle(part_graph()) is None


@pytest.mark.parametrize(
    ("graph", "cycle"),
    [
        ({"a": {"b"}, "b": {"a"}}, ["a", "b", "a"]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
        ({"a": {"b"}, "b": {"c"}, "c": {"b"}}, ["b", "c", "b"]),
    ],
)
def test_the_cycle_finder_finds_cycles(graph: dict[str, set[str]], cycle: list[str] | None) -> None:
    assert _cycle(graph) == cycle


def test_lazy_and_type_checking_imports_count() -> None:
    source = """
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from ..progress.model import Run
def later():
    from ..engine import Engine
    import promptflow_resume.api
"""
    assert imports_in(source, "promptflow_resume.tools") == {
        "promptflow_resume.progress.model",
        "promptflow_resume.engine",
        "promptflow_resume.api",
    }
