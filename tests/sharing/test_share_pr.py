"""Progress files that diff well in a pull request: stable bytes, small diffs, nothing personal."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from promptflow_resume.base import yamlio
from promptflow_resume.progress import ProgressStore, parse, render
from promptflow_resume.sharing import share
from tests.support.share import make_project, resume, start


@pytest.fixture
def project(workdir: Path) -> Path:
    return make_project(workdir / "repo")


def _split(text: str) -> tuple[dict[str, object], str]:
    end = text.index("\n---\n")
    data = yamlio.load(text[4 : end + 1])
    assert isinstance(data, dict)
    return data, text[end + 5 :]


def _conversation(body: str) -> str:
    """The conversation section's entries (from the first entry to the next section)."""
    start = body.index("<!-- flow:entry 1 ")
    return body[start : body.index("<!-- flow:section state")]


def test_loading_and_saving_an_unchanged_file_changes_no_byte(project: Path) -> None:
    _, path = start(project, max_turns=3)
    before = path.read_bytes()
    for _ in range(3):
        store, run, _ = ProgressStore.open(path)
        store.checkpoint(run)
        store.close()
        assert path.read_bytes() == before
    text = before.decode("utf-8")
    assert render(parse(text, path=path)[0]) == text


def test_saving_a_shared_copy_drops_only_its_share_header(project: Path) -> None:
    _, path = start(project, max_turns=3)
    copy = share(path, project / "shared.md").output
    shared = copy.read_text(encoding="utf-8")
    store, run, _ = ProgressStore.open(copy)
    store.checkpoint(run)
    store.close()
    saved = copy.read_text(encoding="utf-8")
    without_header = re.sub(r"(?<=\n---\n\n)(?:>[^\n]*\n)+\n", "", shared)
    assert without_header != shared and saved == without_header


def test_a_progress_file_holds_nothing_machine_specific(project: Path) -> None:
    _, path = start(project, max_turns=3)
    text = path.read_text(encoding="utf-8")
    for needle in {str(project), str(project.resolve()), str(Path.home())}:
        assert needle not in text
    host = socket.gethostname()
    if len(host) >= 4:
        assert host not in text
    data, _ = _split(text)
    assert not {"pid", "host", "owner", "hostname", "user"} & set(data)


def test_resuming_one_step_changes_only_the_lines_that_must_change(project: Path) -> None:
    _, path = start(project, max_turns=3)  # stops at the start of draft
    before = path.read_text(encoding="utf-8")
    run = resume(path, project, max_turns=4)  # runs draft, stops at the start of report
    assert run.status == "budget_exhausted" and run.steps["draft"].status == "completed"
    after = path.read_text(encoding="utf-8")

    old_fm, old_body = _split(before)
    new_fm, new_body = _split(after)
    # The conversation only grows: every old entry is still there, byte for byte.
    assert _conversation(new_body).startswith(_conversation(old_body))
    # The front matter's keys keep their order; what did not change keeps its value.
    assert list(new_fm)[: len(old_fm)] == list(old_fm)
    steady = ("flow_progress", "run_id", "workflow", "created", "inputs", "keywords")
    assert {k: new_fm[k] for k in steady} == {k: old_fm[k] for k in steady}
    old_config, new_config = old_fm["config"], new_fm["config"]
    assert isinstance(old_config, dict) and isinstance(new_config, dict)
    assert new_config["budget"] == {"max_turns": 4}  # the raised limit is recorded
    assert {**new_config, "budget": None} == {**old_config, "budget": None}
    old_steps, new_steps = old_fm["steps"], new_fm["steps"]
    assert isinstance(old_steps, dict) and isinstance(new_steps, dict)
    assert new_steps["inspect"] == old_steps["inspect"]
    old_attempts, new_attempts = old_fm["attempts"], new_fm["attempts"]
    assert isinstance(old_attempts, list) and isinstance(new_attempts, list)
    assert new_attempts[: len(old_attempts)] == old_attempts


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_diff_of_one_resumed_step_touches_no_old_conversation_line(project: Path) -> None:
    _, path = start(project, max_turns=3)

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
            cwd=project,
            check=True,
            capture_output=True,
            text=True,
        ).stdout

    git("init", "-q")
    git("add", "-f", str(path))
    git("commit", "-q", "-m", "run stopped by its budget")
    before = path.read_text(encoding="utf-8").splitlines()
    first = next(i for i, line in enumerate(before, 1) if line.startswith("<!-- flow:entry 1 "))
    last = next(i for i, line in enumerate(before, 1) if line.startswith("<!-- flow:section state"))

    resume(path, project, max_turns=4)
    diff = git("diff", "-U0", "--", str(path))
    removed = [
        (int(m.group(1)), int(m.group(2) or 1))
        for m in re.finditer(r"^@@ -(\d+)(?:,(\d+))? \+", diff, re.MULTILINE)
    ]
    assert removed, "resuming a step must change the file"
    for start_line, count in removed:
        # No removed or rewritten line lies inside the old conversation.
        assert count == 0 or start_line + count - 1 < first or start_line >= last, diff
    deleted = sum(count for _, count in removed)
    assert deleted < 40 < len(before)  # a few state lines change; the file is much longer
