"""Every import is declared: a fresh ``pip install -e '.[dev]'`` must be enough to run flow
and its tests. deptry reads ``pyproject.toml`` and the imports of the package, the benchmarks
and (second pass) the tests; a missing or only-transitive dependency fails here before it
fails on a user's machine.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests import support

ROOT = support.REPO


def _deptry(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("deptry", path=str(Path(sys.executable).parent)) or shutil.which("deptry")
    assert exe, "deptry is not installed: it is part of the [dev] extra"
    return subprocess.run(
        [exe, ".", *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )


def test_package_and_benchmarks_declare_what_they_import() -> None:
    result = _deptry()
    assert result.returncode == 0, result.stdout + result.stderr


def test_tests_import_only_declared_packages() -> None:
    # The test suite is dev code: using dev packages is expected (DEP004), but each one must be
    # declared (DEP001) and declared directly, not reached through another package (DEP003).
    # The modules beside the tests and the benchmarks, which they import by name, are local
    # (the command line's list replaces pyproject.toml's).
    local = sorted([*(ROOT / "tests").glob("*.py"), *(ROOT / "bench").glob("*.py")])
    helpers = [arg for p in local for arg in ("-kf", p.stem)]
    result = _deptry(
        "--exclude",
        r"fuzz|\.venv|venv|build|\.git",
        "--ignore",
        "DEP002,DEP004",
        *helpers,
    )
    assert result.returncode == 0, result.stdout + result.stderr
