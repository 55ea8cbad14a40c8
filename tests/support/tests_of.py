"""The test files that import a module of the package, found from its path::

    python -m tests.support.tests_of promptflow_resume/progress/store.py

prints each ``tests/**/test_*.py`` that imports the module (``import``, ``from … import``,
wherever written, or a name a package re-exports from it), one a line, those in the folder
named for the module's part first (``tests/progress/`` for ``promptflow_resume/progress/``,
``tests/run/`` for ``promptflow_resume/run/`` and the modules at the package's root). Tests
that run ``flow`` as a command import none of it: find them by the command's name
(``grep -rl '"resume"' tests``).
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

from . import REPO

#: The package whose modules' tests are found.
PACKAGE = "promptflow_resume"


def module_name(path: Path) -> str:
    """``promptflow_resume/progress/store.py`` → ``promptflow_resume.progress.store``."""
    parts = path.resolve().relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(source: str) -> set[str]:
    """Every module ``source`` imports: ``from a import b`` counts as ``a``, and as the module
    ``b`` is (a submodule) or was defined in (a name the package ``a`` re-exports)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(_home(node.module, alias.name) for alias in node.names)
    return names


def _home(package: str, name: str) -> str:
    """The module of ours that ``from package import name`` takes ``name`` from: a submodule,
    the module a package's ``__init__`` imports the name from (or lazily exports it from), or
    the package itself."""
    folder = REPO.joinpath(*package.split("."))
    if package.split(".")[0] != PACKAGE or not (folder / "__init__.py").is_file():
        return package
    if (folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file():
        return f"{package}.{name}"
    return _exports(folder / "__init__.py").get(name, package)


@functools.cache
def _exports(init: Path) -> dict[str, str]:
    """Name → module for what a package's ``__init__`` imports from its modules (``from .x
    import N``) or exports lazily (the ``{"N": "x"}`` table given to ``lazy_exports``)."""
    package = module_name(init)
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(init.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                found[alias.asname or alias.name] = f"{package}.{node.module}"
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if (
                    isinstance(key, ast.Constant)
                    and isinstance(value, ast.Constant)
                    and isinstance(key.value, str)
                    and isinstance(value.value, str)
                ):
                    found.setdefault(key.value, f"{package}.{value.value}")
    return found


@functools.cache
def _imports_of(test: Path) -> frozenset[str]:
    return frozenset(imported(test.read_text(encoding="utf-8")))


def tests_of(path: Path) -> list[Path]:
    """The test files importing the module at ``path``, relative to the checkout, sorted."""
    wanted = module_name(path)
    parts = wanted.split(".")
    home = REPO / "tests" / (parts[1] if len(parts) > 2 else "run")
    found = [
        test for test in sorted((REPO / "tests").rglob("test_*.py")) if wanted in _imports_of(test)
    ]
    return [t.relative_to(REPO) for t in sorted(found, key=lambda t: (t.parent != home, t))]


def main(argv: list[str]) -> int:
    """Print the tests of each module path given; 2 without one."""
    if not argv:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    for arg in argv:
        for test in tests_of(Path(arg)):
            print(test.as_posix())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
