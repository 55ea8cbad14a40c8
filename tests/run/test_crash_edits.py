"""SIGKILL around each edit, then resume: every edit takes effect exactly once.

An edit is not idempotent (the replacement here keeps its old text inside the new one, so a
second application would add a second line); resume judges an edit in flight by the file:
applied → recorded as done, not applied → applied once. No person is ever needed here, since
nothing else touches the files.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from promptflow_resume.progress import load_progress
from tests import support
from tests.support.flowproc import flow, flow_env
from tests.support.slow import sweep

FIXTURES = support.FIXTURES / "copilot"
RUN = ("run", "edits.prompt.md", "--recording", "edits.script.yaml")
MORE = ("--progress", "run/progress.md", "--new")
_DIFF = re.compile(r"```diff\n.*?\n```", re.S)


def _fresh(where: Path) -> Path:
    where.mkdir(parents=True)
    for name in ("edits.prompt.md", "edits.script.yaml"):
        shutil.copy(FIXTURES / name, where / name)
    (where / "notes.md").write_text("# Notes\n\nSome text.\n")
    (where / "scratch.txt").write_text("temporary\n")
    return where


def _files(where: Path) -> dict[str, str]:
    names = ("notes.md", "scratch.txt", "docs/CHANGES.md")
    return {n: (where / n).read_text() for n in names if (where / n).exists()}


def _shape(progress: Path) -> list[tuple[str, str | None, list[str]]]:
    """Roles and tools in order, with the diffs of tool results (their wording may differ:
    an edit found applied on resume says so)."""
    run, _ = load_progress(progress)
    return [
        (e.role, e.tool, _DIFF.findall(e.content) if e.role == "tool_result" else [])
        for e in run.transcript
        if e.role != "note"
    ]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], list]:
    where = _fresh(tmp_path_factory.mktemp("ref") / "p")
    result = flow(*RUN, *MORE, cwd=where)
    assert result.returncode == 0, result.stderr
    files = _files(where)
    assert files == {
        "notes.md": "# Notes\n\nSee CHANGES.\n\nSome text.\n",
        "docs/CHANGES.md": "# Changes\n- tidied the notes\n",
    }
    return files, _shape(where / "run" / "progress.md")


CASES = [
    *(("edit.before_write", n) for n in (1, 2, 3, 4)),
    *(("edit.after_write", n) for n in (1, 2, 3, 4)),
    *(("engine.tool_start_recorded", n) for n in (2, 4)),
    ("engine.tool_ran", 2),
]


@pytest.mark.parametrize(
    ("point", "n"), sweep(CASES, keep={("edit.before_write", 2), ("edit.after_write", 2)})
)
def test_a_kill_around_an_edit_resumes_to_the_same_files(
    tmp_path: Path, reference: tuple[dict[str, str], list], point: str, n: int
) -> None:
    files, shape = reference
    where = _fresh(tmp_path / "p")
    progress = where / "run" / "progress.md"
    killed = flow(*RUN, *MORE, cwd=where, env=flow_env(FLOW_CRASH_AT=f"{point}:{n}"))
    assert killed.returncode == -9, killed.stderr
    resumed = flow("resume", "run/progress.md", cwd=where)
    assert resumed.returncode == 0, resumed.stderr
    assert _files(where) == files
    if (point, n) == ("edit.after_write", 4):
        # A deleted file's text is gone, so its diff cannot be shown again after the fact.
        shape = [(r, t, [] if t == "delete_file" else d) for r, t, d in shape]
    assert _shape(progress) == shape
    if point == "edit.after_write":
        run, _ = load_progress(progress)
        assert any("applied before the run stopped" in e.content for e in run.transcript)
