"""``flow log``: each attempt's start, end, status, reason, usage and notes, hand edits included."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptflow_resume.sharing import fork, read_log, rewind, run_log
from tests.support.share import make_project, resume, start


@pytest.fixture
def project(workdir: Path) -> Path:
    return make_project(workdir / "repo")


def test_the_log_lists_every_attempt_with_its_status_reason_and_usage(project: Path) -> None:
    _, path = start(project, max_turns=3)
    resume(path, project)
    attempts = run_log(path)
    assert [(a.n, a.status) for a in attempts] == [(1, "budget_exhausted"), (2, "completed")]
    assert "turn budget used: 3 of 3 turns" in (attempts[0].reason or "")
    assert attempts[1].reason is None
    assert [a.usage.turns for a in attempts] == [3, 2]
    assert [a.usage.input_tokens for a in attempts] == [450, 550]
    assert all(a.ended is not None and a.seconds is not None for a in attempts)
    log = read_log(path)
    assert log.usage.turns == 5 and log.status == "completed"


def test_hand_edits_are_pending_until_a_resume_notes_them_in_its_attempt(project: Path) -> None:
    _, path = start(project, max_turns=3)
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("holds one line.", "holds exactly one line."), encoding="utf-8")

    pending = read_log(path)
    assert pending.pending_edits == [11]
    assert all(not a.edits for a in pending.attempts)

    resume(path, project)
    after = read_log(path)
    assert after.pending_edits == []
    assert after.attempts[1].edits == ["entry 11 edited by hand"]
    assert after.attempts[1].edits[0] in after.attempts[1].notes


def test_a_rewind_is_a_note_in_the_history_and_a_fork_names_its_parent(project: Path) -> None:
    _, path = start(project)
    result = rewind(path, "report")
    notes = run_log(path)[-1].notes
    assert notes == [result.note]

    forked = fork(path, "report", project / "f.md")
    log = read_log(forked.output)
    assert log.attempts == []
    assert log.parent == {"path": ".flow/runs/r1/progress.md", "run_id": "r1", "step": "report"}
    data = log.to_dict()
    assert data["parent"] == log.parent and data["attempts"] == []
