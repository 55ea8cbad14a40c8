"""What the architecture contracts cannot see for themselves: imports by name.

The contracts in ``pyproject.toml`` (import-linter, run by CI's ``lint-imports``; each one
broken on purpose in ``tests/guards/test_contracts.py``) follow ``import`` statements wherever
they are written. Three more ways of importing are invisible to them:

- a registry entry, the string ``"promptflow_resume.module:attribute"``, loaded by
  ``base/registry.py`` when the name is first used: an import by the module holding it;
- a ``lazy_exports`` table, whose values are modules the package exports from
  (``base/lazyexports.py``): imports by that package;
- ``importlib.import_module`` of a literal name: an import where it is written.

Here each is written out as a plain ``import`` in a copy of the package, and the copy must
keep every contract. An import by a computed name could not be written out, so it is refused
outside the two modules that turn names into imports.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.support.contracts import PACKAGE, copy_package, lint_imports

#: This file, as the failure messages name it.
HERE = "tests/guards/test_layers.py"
#: The only modules that may import by a computed name: they are how names become imports.
COMPUTED_IMPORTS_ALLOWED = {"base/registry.py", "base/lazyexports.py"}


# --- reading imports by name ------------------------------------------------------------------


def imports_by_name(source: str, package: str) -> dict[str, int]:
    """What ``source`` imports by name from its own top-level package, each with its first
    line: registry entries, ``lazy_exports`` tables, ``import_module`` of a literal name.

    ``package`` is the dotted package the module belongs to (a lazy table's values are
    relative to it).
    """
    root = package.split(".")[0]
    entry = re.compile(rf"{re.escape(root)}(?:\.\w+)+:\w+")
    tree = ast.parse(source)
    found: dict[str, int] = {}

    def add(name: str, line: int) -> None:
        if name.split(".")[0] == root:
            found.setdefault(name, line)

    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
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


def _package_of(path: Path, root: Path) -> str:
    """The dotted package a module file belongs to (for an ``__init__``, its own)."""
    return ".".join((root.name, *path.relative_to(root).parent.parts))


def write_out_imports_by_name(root: Path) -> list[str]:
    """Append to each module under ``root`` a plain import of each module it imports by name;
    returns, for each line added, where it was added and which line of the module it stands
    for."""
    added = []
    for path in sorted(root.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        found = imports_by_name(source, _package_of(path, root))
        if not found:
            continue
        first = source.count("\n") + 2
        lines = [f"import {module}" for module in found]
        path.write_text(source + "\n" + "\n".join(lines) + "\n", encoding="utf-8")
        shown = path.relative_to(root.parent).as_posix()
        added += [
            f"{shown}: line {first + i} stands for line {line} ({module})"
            for i, (module, line) in enumerate(found.items())
        ]
    return added


# --- the package --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def written_out(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A copy of the package with its imports by name written out, and the lines added."""
    folder = tmp_path_factory.mktemp("written-out")
    return folder, write_out_imports_by_name(copy_package(folder))


def test_the_package_with_its_imports_by_name_keeps_every_contract(
    written_out: tuple[Path, list[str]],
) -> None:
    folder, added = written_out
    result = lint_imports(folder)
    if result.returncode != 0:
        pytest.fail(
            result.stdout
            + result.stderr
            + "\nLines this test added to a copy of the package (imports by name):\n"
            + "\n".join(added),
            pytrace=False,
        )


def test_imports_by_name_are_found_in_the_package(written_out: tuple[Path, list[str]]) -> None:
    _, added = written_out
    found = {line.rpartition("(")[2].rstrip(")") for line in added}
    # A provider and a tool registered by name, a command family, the package's lazy exports.
    assert {
        f"{PACKAGE}.providers.openai",
        f"{PACKAGE}.tools.terminal",
        f"{PACKAGE}.cli.commands_share",
        f"{PACKAGE}.api",
    } <= found


def test_no_module_imports_by_a_computed_name() -> None:
    root = Path(__file__).resolve().parents[2] / PACKAGE
    hidden = [
        f"{PACKAGE}/{path.relative_to(root).as_posix()}:{line}"
        for path in sorted(root.rglob("*.py"))
        if path.relative_to(root).as_posix() not in COMPUTED_IMPORTS_ALLOWED
        for line in computed_imports(path.read_text(encoding="utf-8"))
    ]
    if hidden:
        pytest.fail(
            "\n".join(
                f"{where} imports by a computed name, which the contracts cannot follow: "
                "register the name in a Registry (base/registry.py) and load it from there."
                for where in hidden
            ),
            pytrace=False,
        )


# --- the reader, on sources written to show each way ----------------------------------------


def test_a_registry_entry_is_an_import_by_the_module_holding_it() -> None:
    source = 'REGISTRY.register("x", "fakepkg.high.impl:Thing")\nNOTE = "fakepkg is fine"\n'
    assert imports_by_name(source, "fakepkg.low") == {"fakepkg.high.impl": 1}


def test_a_lazy_exports_table_is_an_import_by_its_package() -> None:
    source = (
        "from ..base.lazyexports import lazy_exports\n"
        '_EXPORTS = {"Run": "model", "Other": "views.page"}\n'
        "__getattr__ = lazy_exports(__name__, _EXPORTS)\n"
    )
    assert imports_by_name(source, "fakepkg.pkg") == {
        "fakepkg.pkg.model": 2,
        "fakepkg.pkg.views.page": 2,
    }


def test_import_module_of_a_literal_name_is_an_import_and_of_a_computed_one_is_refused() -> None:
    source = (
        "import importlib\n"
        "def load(name):\n"
        '    importlib.import_module("json")\n'
        '    importlib.import_module("fakepkg.api")\n'
        '    return importlib.import_module(f"fakepkg.{name}")\n'
    )
    assert imports_by_name(source, "fakepkg") == {"fakepkg.api": 4}
    assert computed_imports(source) == [5]


def test_an_import_written_out_breaks_a_contract_as_its_name_did(tmp_path: Path) -> None:
    root = copy_package(tmp_path)
    with (root / "tools" / "notes.py").open("a", encoding="utf-8") as handle:
        handle.write('\n_ENTRY = "promptflow_resume.progress.store:ProgressStore"\n')
    added = write_out_imports_by_name(root)
    assert any(line.startswith(f"{PACKAGE}/tools/notes.py") for line in added)
    result = lint_imports(tmp_path)
    assert result.returncode == 1
    assert "promptflow_resume.tools.notes -> promptflow_resume.progress.store" in result.stdout
