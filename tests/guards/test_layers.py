"""The package's parts form layers, and so do the modules inside a package: each imports only
what sits below it (or beside it), never in a cycle.

What counts as an import, wherever it is written (module level, inside a function, under
``TYPE_CHECKING``): an ``import`` statement; a registry entry, the string
``"promptflow_resume.module:attribute"``, which counts as an import by the module holding it
(``base/registry.py``); a ``lazy_exports`` table, whose values count as imports by the package
that exports them; and ``importlib.import_module`` of a literal name. An import by a computed
name is refused outside ``base/registry.py`` and ``base/lazyexports.py``, so nothing escapes.

Two orders, both top to bottom, in the same form (a list of sets; a module may import one of
its own set unless that closes a cycle):

- ``LAYERS``: the parts, the top-level modules and subpackages of ``promptflow_resume``. A new
  part must be added; the failure says which sets it fits in.
- ``MODULE_LAYERS``: the modules inside a package. A module the list does not name sits in the
  set marked ``"*"``, so a new file needs an edit only when its imports break the order; the
  failure then says which sets it fits in. A package without a list is checked for cycles only.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

#: The package, found from here wherever this file sits under ``tests/``.
PACKAGE = next(
    folder / "promptflow_resume"
    for folder in Path(__file__).resolve().parents
    if (folder / "promptflow_resume").is_dir()
)
#: This file, as the failure messages name it.
HERE = Path(__file__).resolve().relative_to(PACKAGE.parent).as_posix()

#: The parts, top to bottom.
LAYERS: list[set[str]] = [
    # The front: the command line, and the package's public names (``__init__`` exports the
    # API's functions lazily, and the command line reads its version).
    {"__main__", "cli", "__init__"},
    # A GitHub Actions step: runs or resumes a pull request's run through the front.
    {"ci"},
    {"batch", "front", "serve"},
    # The event stream (--events): a reporter that writes what the engine tells.
    {"eventstream", "otel"},
    {"api"},
    # The run machinery.
    {"starting", "resuming", "attempt"},
    {"status", "decisions"},
    {"subworkflows", "runrequests"},
    {"check", "engine", "reconcile", "recovery", "sharing", "detect", "show", "compaction"},
    # Handoff chains (composed from agent files) and hooks, both recorded in the progress file.
    {"conversation", "events", "hooks", "recorded", "runoptions", "handoffs", "runview"},
    # Git worktrees and file snapshots; the person's trust in what a folder brings.
    {"worktree", "snapshots", "trust"},
    # What a run is made of: tools, the workflow file, the model providers.
    {"tools"},
    {"workflow"},
    {"providers"},
    # The progress file's format.
    {"progress"},
    # Records and helpers every part above shares (ground modules outside base/ so far).
    {"chat", "flowfolder"},
    # The ground: no knowledge of runs or workflows.
    {"base"},
]

#: The modules inside a package, top to bottom; ``"*"`` marks the set of a module not listed.
MODULE_LAYERS: dict[str, list[set[str]]] = {
    "progress": [
        {"__init__"},
        # What reads or writes runs through the store.
        {"*"},
        {"store"},
        {"parse"},
        {"render"},
        {"frontmatter"},
        # One concern of the format each: digests, journal, sidecars, seals, migrations, the
        # keys a newer flow wrote.
        {
            "digest",
            "examples",
            "journal",
            "links",
            "migrations",
            "seal",
            "sidecar",
            "state",
            "unknown",
        },
        # The records and what needs nothing of the format: which formats this flow reads; a
        # mirror gets the store's bytes.
        {"model", "schema", "rawtext", "location", "owner", "versions", "mirror"},
    ],
    "tools": [
        # The registry of the built-in tools and a run's tool set.
        {"__init__"},
        # MCP servers' tools.
        {"mcp_check", "mcp_wiring"},
        {"mcp", "mcp_process", "mcp_config"},
        # One tool (or a family of tools) each.
        {"*", "changes", "codebase", "edit", "fetch", "notes", "terminal", "commands"},
        # What the tools share: confinement, argument checks, file scans.
        {"builtin"},
        {"scan", "ignore"},
        # What a tool is, and what it may do without asking.
        {"base", "allowlists"},
        {"approval"},
        {"consent"},
        {"escapes"},
    ],
    "workflow": [
        {"__init__"},
        {"plan"},
        # What a name given to flow run stands for, and agents found by name.
        {"prompts", "agentfind", "byname"},
        {"loader"},
        # An agent file read as a workflow.
        {"agentload", "agentdirs"},
        {"config"},
        # One part of a prompt or agent file each.
        {"*", "body", "commands", "frontmatter", "hashing", "inputs", "instructions", "variables"},
        # What the parts share: positions, diagnostics, values, tool names.
        {"diagnostics", "source", "toolnames", "values"},
        # The records.
        {"model"},
    ],
    "providers": [
        # The registry.
        {"__init__"},
        # One provider each.
        {"*", "anthropic", "echo", "openai", "replay", "scripted"},
        # What providers share: SDK calls, recordings, retries, prices, endpoints, models.
        {"sdkcall", "recording"},
        {"retry", "context", "endpoints", "models", "params", "givenprices"},
        {"pricing"},
        # What a provider is.
        {"base"},
    ],
    "cli": [
        # The error boundary and the registry of the commands.
        {"__init__"},
        # One family of commands each.
        {"*"},
        # What the commands share: the app, the options.
        {"app", "options"},
    ],
}

#: The only modules that may import by a computed name: they are how names become imports.
COMPUTED_IMPORTS_ALLOWED = {"base.registry", "base.lazyexports"}


# --- reading imports ----------------------------------------------------------------------


def imports_in(source: str, package: str) -> dict[str, int]:
    """What ``source`` imports from its own top-level package, dotted as written (relative
    imports resolved; ``from a import b`` as ``a.b``), each with its first line.

    ``package`` is the dotted package the source's relative imports start from.
    """
    root = package.split(".")[0]
    entry = re.compile(rf"{re.escape(root)}(?:\.\w+)+:\w+")
    tree = ast.parse(source)
    found: dict[str, int] = {}

    def add(name: str, line: int) -> None:
        if name.split(".")[0] == root:
            found.setdefault(name, line)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                add(f"{target}.{alias.name}" if alias.name != "*" else target, node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if entry.fullmatch(node.value):  # a registry entry, "module:attribute"
                add(node.value.partition(":")[0], node.lineno)
        elif isinstance(node, ast.Call):
            name = _called(node)
            if name == "import_module" and node.args and _literal(node.args[0]):
                add(_literal(node.args[0]) or "", node.lineno)
            elif name == "lazy_exports" and len(node.args) == 2:
                for module, line in _lazy_table(tree, node.args[1]):
                    add(f"{package}.{module}", line)
    return found


def computed_imports(source: str) -> list[int]:
    """Lines of ``source`` that import a module by a computed name."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and _called(node) in {"import_module", "__import__"}
        and not (node.args and _literal(node.args[0]))
    ]


def _called(node: ast.Call) -> str | None:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)


def _literal(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _lazy_table(tree: ast.Module, table: ast.expr) -> Iterable[tuple[str, int]]:
    """The values of the dict literal a module-level name ``table`` is assigned."""
    if not isinstance(table, ast.Name):
        return
    for stmt in tree.body:
        targets = (
            stmt.targets
            if isinstance(stmt, ast.Assign)
            else [stmt.target]
            if isinstance(stmt, ast.AnnAssign)
            else []
        )
        value = getattr(stmt, "value", None)
        named = any(isinstance(t, ast.Name) and t.id == table.id for t in targets)
        if named and isinstance(value, ast.Dict):
            for item in value.values:
                if (module := _literal(item)) is not None:
                    yield module, item.lineno


# --- the graph ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Edge:
    """One module importing another: where, in the importer's file."""

    source: str
    target: str
    line: int


@dataclass
class Graph:
    """The modules of a package (``api``, ``tools.edit``, ``tools.__init__``, ``__init__``)
    and their imports of each other."""

    root: Path
    files: dict[str, Path]
    edges: list[Edge]

    def shown(self, module: str) -> str:
        """The module's file, as a person finds it: ``promptflow_resume/tools/edit.py``."""
        return self.files[module].relative_to(self.root.parent).as_posix()

    def where(self, edge: Edge) -> str:
        return f"{self.shown(edge.source)}:{edge.line}"


def module_graph(root: Path) -> Graph:
    """Every module under the package folder ``root`` and what it imports of the package."""
    files = {_key(path, root): path for path in sorted(root.rglob("*.py"))}
    edges: list[Edge] = []
    for source, path in files.items():
        package = ".".join(
            (root.name, *path.relative_to(root).parent.parts)
        )  # where relative imports start, for a module and for an __init__ alike
        for name, line in imports_in(path.read_text(encoding="utf-8"), package).items():
            target = _resolve(name, root, files)
            if target != source:
                edges.append(Edge(source, target, line))
    return Graph(root, files, edges)


def _key(path: Path, root: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts)


def _resolve(name: str, root: Path, files: dict[str, Path]) -> str:
    """The module a dotted name lands in: the longest prefix that is a module or a package."""
    parts = name.split(".")[1:]
    while parts:
        dotted = ".".join(parts)
        if dotted in files:
            return dotted
        if f"{dotted}.__init__" in files:
            return f"{dotted}.__init__"
        parts.pop()
    return "__init__"


def part(module: str) -> str:
    """``tools.edit`` → ``tools``; ``api`` → ``api``; the package's ``__init__`` → itself."""
    return module.split(".")[0]


def package_and_name(module: str) -> tuple[str, str] | None:
    """``tools.edit`` → (``tools``, ``edit``); None for a top-level module."""
    pieces = module.split(".")
    return (pieces[0], pieces[1]) if len(pieces) > 1 else None


# --- the rules ----------------------------------------------------------------------------


def _index(name: str, layers: list[set[str]]) -> int | None:
    return next((i for i, layer in enumerate(layers) if name in layer), None)


def _sets(layers: list[set[str]], low: int, high: int) -> str:
    return ", ".join(str(sorted(layers[i])) for i in range(low, high + 1))


def _fits(
    name: str, imports: Iterable[int], imported_by: Iterable[int], layers: list[set[str]]
) -> str:
    """Where ``name`` may go in ``layers``: below every importer, above (or beside) every
    import; or why nowhere."""
    above = max(imported_by, default=0)
    below = min(imports, default=len(layers) - 1)
    if above > below:
        return (
            f"no set fits: it imports {_sets(layers, below, below)} and is imported by "
            f"{_sets(layers, above, above)}; move what both need down instead"
        )
    return f"add {name!r} to one of these sets: {_sets(layers, above, below)}"


def unplaced_parts(graph: Graph, layers: list[set[str]]) -> list[str]:
    """A message for each part in no set of ``layers``, saying which sets it fits in."""
    parts = sorted({part(m) for m in graph.files})
    wrong = []
    for name in (p for p in parts if _index(p, layers) is None):
        imports = [_index(part(e.target), layers) for e in graph.edges if part(e.source) == name]
        users = [_index(part(e.source), layers) for e in graph.edges if part(e.target) == name]
        fits = _fits(
            name,
            (i for i in imports if i is not None),
            (i for i in users if i is not None),
            layers,
        )
        shown = graph.shown(name) if name in graph.files else f"{graph.root.name}/{name}/"
        wrong.append(f"{shown} is in no set of LAYERS ({HERE}): {fits}.")
    return wrong


def upward_part_imports(graph: Graph, layers: list[set[str]]) -> list[str]:
    """A message for each import of a part above the importer's part."""
    wrong = []
    for edge in graph.edges:
        source, target = _index(part(edge.source), layers), _index(part(edge.target), layers)
        if source is not None and target is not None and target < source:
            wrong.append(
                f"{graph.where(edge)} imports {graph.shown(edge.target)}: the part "
                f"{part(edge.target)!r} is above {part(edge.source)!r} in LAYERS ({HERE}). "
                "Import downward only: move what both need into a lower part."
            )
    return wrong


def _module_index(name: str, layers: list[set[str]]) -> int:
    found = _index(name, layers)
    return found if found is not None else _index("*", layers) or 0


def upward_module_imports(graph: Graph, module_layers: dict[str, list[set[str]]]) -> list[str]:
    """A message for each import, inside a package with an order, of a module above the
    importer; for an unlisted module, which sets of the order it fits in."""
    inner: dict[str, list[tuple[str, str, Edge]]] = defaultdict(list)
    for edge in graph.edges:
        source, target = package_and_name(edge.source), package_and_name(edge.target)
        if source and target and source[0] == target[0] and source[0] in module_layers:
            inner[source[0]].append((source[1], target[1], edge))
    wrong = []
    for package, edges in sorted(inner.items()):
        layers = module_layers[package]
        for source, target, edge in edges:
            if _module_index(target, layers) >= _module_index(source, layers):
                continue
            order = f'MODULE_LAYERS["{package}"] ({HERE})'
            if _index(source, layers) is None:
                imports = [_module_index(t, layers) for s, t, _ in edges if s == source]
                users = [_module_index(s, layers) for s, t, _ in edges if t == source]
                fits = _fits(source, imports, users, layers)
                fix = f'it is not listed, so it sits in the set with "*"; {fits}'
            else:
                fix = "import downward only: move what both need into a lower module"
            wrong.append(
                f"{graph.where(edge)} imports {graph.shown(edge.target)}, which is above it in "
                f"{order}: {fix}."
            )
    return wrong


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
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


def module_cycle(graph: Graph) -> str | None:
    """One cycle between modules, each step with the line of its import; or None."""
    targets: dict[str, set[str]] = defaultdict(set)
    for edge in graph.edges:
        targets[edge.source].add(edge.target)
    found = cycle(targets)
    if found is None:
        return None
    lines = {(e.source, e.target): e.line for e in graph.edges}
    steps = [
        f"{graph.shown(a)}:{lines[a, b]} imports {graph.shown(b)}"
        for a, b in itertools.pairwise(found)
    ]
    return "import cycle: " + "; ".join(steps) + ". Move what both need into a lower module."


def part_graph(graph: Graph) -> dict[str, set[str]]:
    """Each part → the other parts it imports."""
    parts: dict[str, set[str]] = {part(m): set() for m in graph.files}
    for edge in graph.edges:
        if part(edge.source) != part(edge.target):
            parts[part(edge.source)].add(part(edge.target))
    return parts


# --- the package --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def graph() -> Graph:
    return module_graph(PACKAGE)


def _none(wrong: list[str]) -> None:
    """Fail with every message whole (an assert's diff would cut them)."""
    if wrong:
        pytest.fail("\n".join(wrong), pytrace=False)


def test_every_part_has_a_layer(graph: Graph) -> None:
    _none(unplaced_parts(graph, LAYERS))


def test_no_part_imports_a_part_above_it(graph: Graph) -> None:
    _none(upward_part_imports(graph, LAYERS))


def test_no_module_imports_a_module_above_it_in_its_package(graph: Graph) -> None:
    _none(upward_module_imports(graph, MODULE_LAYERS))


def test_every_module_order_has_one_default_set() -> None:
    assert {
        name: sum("*" in layer for layer in order) for name, order in MODULE_LAYERS.items()
    } == {name: 1 for name in MODULE_LAYERS}


def test_no_import_cycle_between_parts(graph: Graph) -> None:
    found = cycle(part_graph(graph))
    _none([f"import cycle between parts: {' → '.join(found)}"] if found else [])


def test_no_import_cycle_between_modules(graph: Graph) -> None:
    found = module_cycle(graph)
    _none([found] if found else [])


def test_no_module_imports_by_a_computed_name(graph: Graph) -> None:
    hidden = [
        f"{graph.shown(module)}:{line}"
        for module, path in graph.files.items()
        if module not in COMPUTED_IMPORTS_ALLOWED
        for line in computed_imports(path.read_text(encoding="utf-8"))
    ]
    _none(
        [
            f"{where} imports by a computed name, which {HERE} cannot follow: register the "
            "name in a Registry (base/registry.py) and load it from there."
            for where in hidden
        ]
    )


def test_registry_entries_are_imports_of_the_module_holding_the_registry(graph: Graph) -> None:
    imported = {(e.source, e.target) for e in graph.edges}
    assert ("providers.__init__", "providers.openai") in imported
    assert ("tools.__init__", "tools.terminal") in imported
    assert ("cli.__init__", "cli.commands_share") in imported
    assert ("__init__", "api") in imported  # a lazy_exports table


# --- the checker, on packages built to break each rule -------------------------------------


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "fakepkg"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_a_registry_entry_naming_a_higher_part_is_an_upward_import(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "low/__init__.py": 'REGISTRY.register("x", "fakepkg.high.impl:Thing")\n',
            "high/__init__.py": "",
            "high/impl.py": "from ..low import REGISTRY\n",
        },
    )
    layers = [{"__init__", "high"}, {"low"}]
    assert upward_part_imports(module_graph(root), layers) == [
        "fakepkg/low/__init__.py:1 imports fakepkg/high/impl.py: the part 'high' is above "
        f"'low' in LAYERS ({HERE}). Import downward only: move what both need into a lower part."
    ]


def test_a_module_importing_a_higher_module_of_its_package_is_refused(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/store.py": "from .model import Run\n",
            "pkg/model.py": "Run = int\n\ndef save():\n    from .store import write\n",
        },
    )
    order = {"pkg": [{"__init__"}, {"store"}, {"*", "model"}]}
    assert upward_module_imports(module_graph(root), order) == [
        "fakepkg/pkg/model.py:4 imports fakepkg/pkg/store.py, which is above it in "
        f'MODULE_LAYERS["pkg"] ({HERE}): import downward only: move what both need into a '
        "lower module."
    ]


def test_an_unlisted_module_sits_in_the_default_set_and_is_told_where_it_fits(
    tmp_path: Path,
) -> None:
    root = _package(
        tmp_path,
        {
            "pkg/__init__.py": "from . import view\n",
            "pkg/store.py": "",
            "pkg/helper.py": "from .model import Run\n",  # new, imports downward: fine
            "pkg/view.py": "from .store import load\n",  # new, imports upward
            "pkg/model.py": "Run = int\n",
        },
    )
    order = {"pkg": [{"__init__"}, {"store"}, {"*"}, {"model"}]}
    assert upward_module_imports(module_graph(root), order) == [
        "fakepkg/pkg/view.py:1 imports fakepkg/pkg/store.py, which is above it in "
        f'MODULE_LAYERS["pkg"] ({HERE}): it is not listed, so it sits in the set with "*"; '
        "add 'view' to one of these sets: ['__init__'], ['store']."
    ]


def test_a_new_part_is_told_which_sets_it_fits_in(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "api.py": "from . import resuming\n",
            "resuming.py": "from .engine import go\n",
            "engine.py": "",
        },
    )
    layers = [{"__init__"}, {"api"}, {"status"}, {"engine"}, {"base"}]
    assert unplaced_parts(module_graph(root), layers) == [
        f"fakepkg/resuming.py is in no set of LAYERS ({HERE}): add 'resuming' to one of these "
        "sets: ['api'], ['status'], ['engine']."
    ]


def test_a_cycle_between_modules_is_found_even_through_a_lazy_import(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from .b import thing\n",
            "pkg/b.py": "thing = 1\n\n\ndef later():\n    from . import a\n",
        },
    )
    graph = module_graph(root)
    assert upward_module_imports(graph, {"pkg": [{"*", "a", "b"}]}) == []
    assert module_cycle(graph) == (
        "import cycle: fakepkg/pkg/a.py:1 imports fakepkg/pkg/b.py; fakepkg/pkg/b.py:5 "
        "imports fakepkg/pkg/a.py. Move what both need into a lower module."
    )


def test_lazy_exports_type_checking_and_literal_names_count_as_imports(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "pkg/__init__.py": (
                "from ..base.lazyexports import lazy_exports\n"
                '_EXPORTS = {"Run": "model"}\n'
                "__getattr__ = lazy_exports(__name__, _EXPORTS)\n"
            ),
            "pkg/model.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from ..engine import Engine\n"
                "def later():\n"
                "    import importlib\n"
                '    return importlib.import_module("fakepkg.api")\n'
            ),
            "base/__init__.py": "",
            "base/lazyexports.py": "",
            "engine.py": "",
            "api.py": "",
        },
    )
    edges = {(e.source, e.target, e.line) for e in module_graph(root).edges}
    assert edges == {
        ("pkg.__init__", "base.lazyexports", 1),
        ("pkg.__init__", "pkg.model", 2),
        ("pkg.model", "engine", 3),
        ("pkg.model", "api", 6),
    }


def test_an_import_by_a_computed_name_is_found() -> None:
    source = (
        "import importlib\n"
        "def load(name):\n"
        '    importlib.import_module("json")\n'
        '    return importlib.import_module(f"fakepkg.{name}")\n'
    )
    assert computed_imports(source) == [4]


@pytest.mark.parametrize(
    ("edges", "found"),
    [
        ({"a": {"b"}, "b": {"a"}}, ["a", "b", "a"]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
        ({"a": {"b"}, "b": {"c"}, "c": {"b"}}, ["b", "c", "b"]),
    ],
)
def test_the_cycle_finder_finds_cycles(edges: dict[str, set[str]], found: list[str] | None) -> None:
    assert cycle(edges) == found
