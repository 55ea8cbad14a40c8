"""The CLI is a thin layer: its modules parse options, call the library's public API, print.

A command module that imports the run machinery (the engine, the sub-workflow runner,
reconcile, …) or the progress file's internals is deciding something a library user would need
too; that decision belongs in the library. Every import counts, wherever it is written: at
module level, inside a function and under ``TYPE_CHECKING``. From the progress package the CLI
may import its public names (``promptflow_resume.progress.__all__``, from the package or from
the module that defines them) and the records of ``progress.model``.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

import promptflow_resume.progress
from tests import support

PACKAGE = support.REPO / "promptflow_resume"
CLI = PACKAGE / "cli"

#: Parts a CLI module never imports: the run machinery behind the library's API, every module
#: of ``run/`` but what the API speaks (``RUN_SPOKEN``: the options, the requests, the events a
#: watcher is told, and the hooks listing ``flow hooks`` prints).
RUN = PACKAGE / "run"
RUN_SPOKEN = {"runoptions", "events", "requests", "hooks"}
FORBIDDEN = tuple(
    f"promptflow_resume.run.{path.stem}"
    for path in sorted(RUN.glob("*.py"))
    if path.stem not in RUN_SPOKEN | {"__init__"}
)
PROGRESS = "promptflow_resume.progress"
#: Importable from the progress package: the records, and the names the package exports.
PROGRESS_RECORDS = f"{PROGRESS}.model"

#: CLI modules still allowed to cross the boundary, each with the reason. The test fails when
#: an entry is no longer needed, so the allowance cannot outlive the clean-up.
ALLOWANCE: dict[str, str] = {}


def _imports(source: str, package: str) -> list[tuple[int, str, list[str]]]:
    """Each import in ``source`` as (line, module, names); relative imports resolved.

    ``import a.b`` is (line, "a.b", []); ``from a import b, c`` is (line, "a", ["b", "c"])."""
    found: list[tuple[int, str, list[str]]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                module = ".".join([*base, *([module] if module else [])])
            found.append((node.lineno, module, [alias.name for alias in node.names]))
    return found


def _within(module: str, part: str) -> bool:
    return module == part or module.startswith(part + ".")


def _crossing(module: str, names: list[str]) -> str | None:
    """Why importing ``names`` from ``module`` crosses the CLI boundary, or None."""
    # ``from promptflow_resume.run import engine`` brings in ``promptflow_resume.run.engine``.
    for target in [module, *(f"{module}.{name}" for name in names)]:
        for part in FORBIDDEN:
            if _within(target, part):
                return f"imports {part}"
    if not _within(module, PROGRESS) or _within(module, PROGRESS_RECORDS):
        return None
    if not names:  # ``import promptflow_resume.progress.parse``
        return None if module == PROGRESS else f"imports progress internals {module}"
    public = set(promptflow_resume.progress.__all__)
    private = [
        name for name in names if name not in public and f"{module}.{name}" != PROGRESS_RECORDS
    ]
    if private:
        return f"imports progress internals {', '.join(private)} from {module}"
    return None


def crossings(source: str, package: str, label: str) -> list[str]:
    """``label:line: why`` for each import in ``source`` that crosses the CLI boundary."""
    found = []
    for line, module, names in _imports(source, package):
        why = _crossing(module, names)
        if why is not None:
            found.append(f"{label}:{line}: {why}")
    return found


def _cli_crossings() -> dict[str, list[str]]:
    return {
        path.name: crossings(
            path.read_text(encoding="utf-8"),
            "promptflow_resume.cli",
            f"promptflow_resume/cli/{path.name}",
        )
        for path in sorted(CLI.glob("*.py"))
    }


def test_cli_modules_import_only_the_public_library() -> None:
    wrong = [
        crossing
        for name, found in _cli_crossings().items()
        if name not in ALLOWANCE
        for crossing in found
    ]
    assert wrong == [], "move the decision behind a public library function:\n" + "\n".join(wrong)


def test_every_allowance_is_still_needed() -> None:
    found = _cli_crossings()
    stale = [name for name in ALLOWANCE if not found.get(name)]
    assert stale == [], f"remove from ALLOWANCE in {__file__}: {stale} no longer cross"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from ..run.engine import Engine", ["m:1: imports promptflow_resume.run.engine"]),
        ("from ..run import reconcile", ["m:1: imports promptflow_resume.run.reconcile"]),
        (
            "import promptflow_resume.run.subworkflows",
            ["m:1: imports promptflow_resume.run.subworkflows"],
        ),
        (
            "def f():\n    from ..progress.store import storage_error",
            ["m:2: imports progress internals storage_error from promptflow_resume.progress.store"],
        ),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from ..progress.state import RunState",
            ["m:3: imports progress internals RunState from promptflow_resume.progress.state"],
        ),
        (
            "from ..progress import ProgressStore, _Package",
            ["m:1: imports progress internals _Package from promptflow_resume.progress"],
        ),
        (
            "import promptflow_resume.progress.parse",
            ["m:1: imports progress internals promptflow_resume.progress.parse"],
        ),
        ("from ..progress import load_progress, model", []),
        ("import promptflow_resume.progress", []),
        ("from ..progress.store import load_progress", []),
        ("from ..progress.model import Run, Usage", []),
        ("from ..base.paths import display_path\nfrom ..show import html_page", []),
    ],
)
def test_the_checker_sees_every_kind_of_import(source: str, expected: list[str]) -> None:
    assert crossings(source, "promptflow_resume.cli", "m") == expected


def test_the_cli_keeps_no_display_path_helper_of_its_own_once_unused() -> None:
    # ``cli.app.shown`` delegates to ``base.paths.display_path`` and stays only while a module
    # still imports it; then it goes, leaving one helper.
    users = [
        path.name
        for path in sorted(CLI.glob("*.py"))
        if any(
            "shown" in names and module.endswith(".app")
            for _, module, names in _imports(path.read_text(encoding="utf-8"), "x.cli")
        )
    ]
    assert set(users) <= set(ALLOWANCE), f"use base.paths.display_path, not cli.app.shown: {users}"
    if "def shown(" in (CLI / "app.py").read_text(encoding="utf-8"):
        assert users, "cli.app.shown is unused: delete it (base.paths.display_path is the one)"


def test_display_path_shows_a_path_below_the_working_directory_by_any_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``flow batch`` printed with the CLI's own helper: below the working directory
    once links are resolved is shown relative, anything else as given."""
    from promptflow_resume.base.paths import display_path

    real = tmp_path / "real"
    (real / "..cache").mkdir(parents=True)
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    monkeypatch.chdir(real)
    assert display_path(tmp_path / "link" / "out" / "batch.md") == "out/batch.md"
    assert display_path(real / "..cache" / "batch.md") == "..cache/batch.md"
    assert display_path(Path("out/batch.md")) == "out/batch.md"
    assert display_path(tmp_path / "elsewhere.md") == str(tmp_path / "elsewhere.md")
    assert display_path(Path("../elsewhere.md")) == "../elsewhere.md"


def test_each_short_flag_has_one_meaning_in_every_command() -> None:
    # `-p` was --provider in `flow run` and --port in `flow serve` (issue 43): a short flag
    # means one long option wherever it appears.
    import typer.main

    from promptflow_resume.cli import register_commands
    from promptflow_resume.cli.app import app

    register_commands()
    meanings: dict[str, set[str]] = {}

    def visit(command: Any) -> None:
        # Typer vendors its own click: its classes are told by what they have.
        for param in command.params:
            opts = [*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ())]
            longs = [o for o in opts if o.startswith("--")]
            for short in (o for o in opts if len(o) == 2 and longs):
                meanings.setdefault(short, set()).update(longs)
        for sub in getattr(command, "commands", {}).values():
            visit(sub)

    visit(typer.main.get_command(app))
    clashes = {short: sorted(longs) for short, longs in meanings.items() if len(longs) > 1}
    assert clashes == {}
