"""A run's folder stands for its progress.md in every command that takes a progress file, and
``flow show`` shows an edit's diff whole (up to 200 lines), not the first 5 lines of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.flowproc import flow, flow_env

WORKFLOW = """\
---
description: Write a long file
provider: scripted
tools: [edit/createFile]
---
Write numbers.txt.
"""

#: 250 lines: the diff has 253 (3 header lines), so 200 are shown and 53 are left out.
LINES = 250


def _script() -> str:
    content = "".join(f"number {n}\\n" for n in range(1, LINES + 1))
    return (
        "replies:\n"
        '  - content: "Writing the file."\n'
        "    tool_calls:\n"
        f'      - {{name: create_file, arguments: {{path: numbers.txt, content: "{content}"}}}}\n'
        '  - content: "Done."\n'
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("folder")
    (where / "numbers.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    (where / "numbers.script.yaml").write_text(_script(), encoding="utf-8")
    args = ("run", "numbers.prompt.md", "--recording", "numbers.script.yaml")
    result = flow(*args, "--progress", "run/progress.md", "--new", cwd=where)
    assert result.returncode == 0, result.stderr
    assert (where / "numbers.txt").read_text().count("\n") == LINES
    return where


def _out(where: Path, *args: str) -> str:
    result = flow(*args, cwd=where, env=flow_env(COLUMNS="160"))
    assert result.returncode == 0, (args, result.stderr)
    return result.stdout


@pytest.mark.parametrize(
    "command",
    [
        ("status",),
        ("status", "--json"),
        ("log",),
        ("log", "--json"),
        ("show",),
        ("show", "--json"),
        ("validate",),
        ("resume", "--plan", "--json"),
        ("review", "--json"),
    ],
    ids=" ".join,
)
def test_the_run_folder_means_its_progress_file(project: Path, command: tuple[str, ...]) -> None:
    by_file = flow(*command, "run/progress.md", cwd=project, env=flow_env(COLUMNS="160"))
    by_folder = flow(*command, "run", cwd=project, env=flow_env(COLUMNS="160"))
    assert by_folder.returncode == by_file.returncode
    assert by_folder.stdout == by_file.stdout
    assert by_folder.stderr == by_file.stderr


def test_the_folder_works_for_share_and_resume(project: Path) -> None:
    shared = _out(project, "share", "run", "-o", "shared/copy.md")
    assert "shared: shared/copy.md" in shared
    assert "already completed: nothing to resume" in _out(project, "resume", "run/")
    # A status JSON names the file it read, not the folder.
    assert json.loads(_out(project, "status", "--json", "run"))["path"] == "run/progress.md"


def test_a_folder_without_a_run_is_one_clear_error(project: Path) -> None:
    (project / "empty").mkdir(exist_ok=True)
    result = flow("status", "empty", cwd=project)
    assert result.returncode == 5
    assert result.stderr.startswith("error: empty: this folder holds no progress.md")
    assert "Traceback" not in result.stderr


def test_show_prints_an_edit_diff_whole_up_to_200_lines(project: Path) -> None:
    # The result: "created ... (250 lines)", a blank line, the fence, 3 diff header lines, the
    # 250 added lines and the closing fence: 257 lines, of which the first 200 are shown.
    show = [line.rstrip() for line in _out(project, "show", "run").splitlines()]
    assert "+number 1" in show and "+number 194" in show
    assert "+number 195" not in show
    assert "… 57 more lines" in show
    # --lines above 200 shows the whole diff.
    whole = [line.rstrip() for line in _out(project, "show", "run", "--lines", "300").splitlines()]
    assert f"+number {LINES}" in whole and not any("more line" in line for line in whole)
