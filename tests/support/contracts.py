"""The architecture contracts of ``pyproject.toml``, run with import-linter's ``lint-imports``
on the checkout's package or on a copy of it that a test changed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from . import REPO

#: The package the contracts are about.
PACKAGE = "promptflow_resume"


def contracts() -> dict[str, str]:
    """Contract id -> name, as ``pyproject.toml`` declares them."""
    import tomllib  # Python 3.11: the tests' own interpreter

    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return {c["id"]: c["name"] for c in config["tool"]["importlinter"]["contracts"]}


def copy_package(folder: Path) -> Path:
    """A copy of the package in ``folder``, for a test to change; returns the copy's folder."""
    shutil.copytree(REPO / PACKAGE, folder / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    return folder / PACKAGE


def lint_imports(folder: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with the checkout's contracts, on the package found in ``folder``."""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    exe = exe or shutil.which("lint-imports")
    assert exe, "lint-imports is not installed: import-linter is part of the [dev] extra"
    return subprocess.run(
        [exe, "--no-cache", "--no-logo", str(REPO / "pyproject.toml")],
        cwd=folder,  # lint-imports finds the package from the folder it runs in
        env={**os.environ, "COLUMNS": "400"},  # one line per import, however long
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
