"""The architecture contracts of ``pyproject.toml`` (import-linter) hold, and each one catches
what it is there to catch.

That the checkout keeps them is checked by ``tests/guards/test_layers.py`` (with the imports
by name written out) and by CI's ``lint-imports``. Here a copy of the package gets one
deliberate violation per contract (``PLANTED``: an import a careless change could add), and
every contract must come out broken, naming its own planted import. A new contract needs a
line in ``PLANTED``: a contract that nothing breaks is one that cannot fail.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.support.contracts import PACKAGE, contracts, copy_package, lint_imports

#: contract id -> (module file to change, the line added to it, what the report must name).
PLANTED: dict[str, tuple[str, str, str]] = {
    # Git worktrees sit below the engine.
    "parts": (
        "worktree.py",
        "from .run.engine import Engine",
        ".worktree -> promptflow_resume.run.engine",
    ),
    # The format knows nothing of workflows, tools or providers.
    "format": (
        "progress/render.py",
        "from ..workflow.records import Workflow",
        ".progress.render -> promptflow_resume.workflow.records",
    ),
    # A tool writing the progress file behind the engine's back.
    "store": (
        "tools/edit.py",
        "from ..progress.store import ProgressStore",
        ".tools.edit -> promptflow_resume.progress.store",
    ),
    # A batch row started by the engine itself, not through the API.
    "batch": (
        "batch/data.py",
        "from ..run.engine import Engine",
        ".batch.data -> promptflow_resume.run.engine",
    ),
    # Two detector modules importing each other.
    "acyclic": (
        "detect/score.py",
        "from .core import detect",
        "No cycles are allowed in promptflow_resume.detect.",
    ),
    "progress-modules": (
        "progress/model.py",
        "from .store import ProgressStore",
        ".progress.model -> promptflow_resume.progress.store",
    ),
    "tools-modules": (
        "tools/escapes.py",
        "from .mcp import McpServers",
        ".tools.escapes -> promptflow_resume.tools.mcp",
    ),
    "workflow-modules": (
        "workflow/records.py",
        "from .loader import load_workflow",
        ".workflow.records -> promptflow_resume.workflow.loader",
    ),
    "providers-modules": (
        "providers/provider.py",
        "from .openai import OpenAIProvider",
        ".providers.provider -> promptflow_resume.providers.openai",
    ),
    # The engine reaching up to the attempt that drives it.
    "run-modules": (
        "run/engine.py",
        "from .attempt import Outcome",
        ".run.engine -> promptflow_resume.run.attempt",
    ),
    "cli-modules": (
        "cli/options.py",
        "from .commands_run import run",
        ".cli.options -> promptflow_resume.cli.commands_run",
    ),
}

#: A new part or module no contract places: the exhaustive layers contracts refuse it.
STRAYS = {"parts": "stray.py", "progress-modules": "progress/stray.py"}


def sections(report: str, names: dict[str, str]) -> dict[str, str]:
    """Each broken contract's part of the report, by contract id."""
    starts = sorted(
        (match.start(), key)
        for key, name in names.items()
        for match in re.finditer(rf"^{re.escape(name)}\n-+\n", report, re.MULTILINE)
    )
    return {
        key: report[start : (starts[i + 1][0] if i + 1 < len(starts) else len(report))]
        for i, (start, key) in enumerate(starts)
    }


@pytest.fixture(scope="module")
def broken(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """The report on a copy of the package holding every planted import and stray module."""
    folder = tmp_path_factory.mktemp("contracts")
    package = copy_package(folder)
    for file, line, _ in PLANTED.values():
        with (package / file).open("a", encoding="utf-8") as handle:
            handle.write(f"\n{line}\n")
    for file in STRAYS.values():
        (package / file).write_text('"""A module no contract places."""\n', encoding="utf-8")
    result = lint_imports(folder)
    return result, sections(result.stdout, contracts())


def test_every_contract_has_a_planted_violation() -> None:
    assert sorted(PLANTED) == sorted(contracts())


@pytest.mark.parametrize("contract", sorted(PLANTED))
def test_a_planted_violation_breaks_its_contract(
    contract: str, broken: tuple[subprocess.CompletedProcess[str], dict[str, str]]
) -> None:
    result, parts = broken
    assert result.returncode == 1, result.stdout + result.stderr
    assert contract in parts, f"{contract} is not broken:\n{result.stdout}"
    assert PLANTED[contract][2] in parts[contract], parts[contract]


@pytest.mark.parametrize("contract", sorted(STRAYS))
def test_a_module_no_layer_names_breaks_the_exhaustive_contract(
    contract: str, broken: tuple[subprocess.CompletedProcess[str], dict[str, str]]
) -> None:
    _, parts = broken
    stray = PACKAGE + "." + STRAYS[contract].removesuffix(".py").replace("/", ".")
    assert "are not listed as layers" in parts[contract]
    assert f"- {stray}\n" in parts[contract]
