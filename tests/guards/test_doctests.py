"""Docstring examples are run: every ``>>>`` example in the package must pass as written.

A module with examples is found by reading the source, so a new one is covered without being
listed here. The examples run in a temp working directory holding a copy of ``workflows/``,
so one that starts a run (``api``) writes its ``.flow/runs`` there.
"""

from __future__ import annotations

import doctest
import importlib
import shutil
from pathlib import Path

import pytest

from tests import support

ROOT = support.REPO
PACKAGE = ROOT / "promptflow_resume"


def _modules_with_examples() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if ">>> " in path.read_text(encoding="utf-8"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


MODULES = _modules_with_examples()


def test_the_modules_newcomers_open_first_have_examples() -> None:
    assert {"promptflow_resume.api", "promptflow_resume.base.textnorm"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(ROOT / "workflows", tmp_path / "workflows")
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, report=True)
    assert result.attempted > 0, f"{name}: no example was found"
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"
