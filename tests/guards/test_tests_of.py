"""``python -m tests.support.tests_of PATH`` finds a module's tests from its path (README,
Development)."""

from __future__ import annotations

import pytest

from tests.support import REPO
from tests.support.tests_of import main
from tests.support.tests_of import tests_of as find_tests


def test_a_modules_tests_are_found_from_its_path_its_parts_folder_first() -> None:
    found = [p.as_posix() for p in find_tests(REPO / "promptflow_resume" / "progress" / "store.py")]
    # Imported as `from promptflow_resume.progress import ProgressStore`: a re-export counts.
    assert "tests/progress/test_progress_store.py" in found
    first_elsewhere = next(i for i, p in enumerate(found) if not p.startswith("tests/progress/"))
    assert all(not p.startswith("tests/progress/") for p in found[first_elsewhere:])


def test_a_module_of_the_run_machinery_lists_its_folders_tests_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([str(REPO / "promptflow_resume" / "run" / "reconcile.py")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and lines[0].startswith("tests/run/")
