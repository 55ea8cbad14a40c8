"""The run loop through the library API: runs, resumes, hand edits, changes, budgets."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from promptflow_resume.api import (
    GivenInputs,
    Limits,
    ResumeRequest,
    RunOptions,
    StartRequest,
    resume_run,
    run_status,
    start_run,
)
from promptflow_resume.base.errors import (
    NeedsReviewError,
    RunLockedError,
    WorkflowChangedError,
)
from promptflow_resume.progress import ProgressStore, load_progress
from promptflow_resume.progress.model import Run
from promptflow_resume.run.reconcile import PLACEHOLDER_RESULT
from promptflow_resume.run.resumeplan import Choices
from tests import support

FIXTURES = support.FIXTURES / "engine"


@pytest.fixture
def project(workdir: Path) -> Path:
    """A working directory holding the counter workflow and its script."""
    for name in ("counter.prompt.md", "counter.script.yaml"):
        shutil.copy(FIXTURES / name, workdir / name)
    return workdir


def start(project: Path, inputs: dict[str, str] | None = None, **options: Any) -> tuple[Run, Path]:
    request = StartRequest(
        project / "counter.prompt.md",
        GivenInputs(inputs or {}),
        recording=project / "counter.script.yaml",
        progress=project / "run" / "progress.md",
    )
    outcome = start_run(request, RunOptions(**options))
    return outcome.run, outcome.path


def shape(run: Run) -> list[tuple[str, str | None, str | None]]:
    """The transcript as (role, step, tool) without flow's own notes."""
    return [(e.role, e.step, e.tool) for e in run.transcript if e.role != "note"]


def counter_lines(project: Path) -> int:
    path = project / "counter.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_a_run_completes_and_records_every_event(project: Path) -> None:
    run, path = start(project)
    assert run.status == "completed"
    assert shape(run) == [
        ("system", None, None),
        ("user", "inspect", None),
        ("assistant", "inspect", None),
        ("tool_call", "inspect", "bump"),
        ("tool_result", "inspect", "bump"),
        ("assistant", "inspect", None),
        ("tool_call", "inspect", "bump"),
        ("tool_call", "inspect", "peek"),
        ("tool_result", "inspect", "bump"),
        ("tool_result", "inspect", "peek"),
        ("assistant", "inspect", None),
        ("user", "report", None),
        ("assistant", "report", None),
    ]
    assert counter_lines(project) == 2
    loaded, report = load_progress(path)
    assert loaded.status == "completed"
    assert [e.content for e in loaded.transcript] == [e.content for e in run.transcript]
    assert loaded.usage.input_tokens == 700 and loaded.usage.output_tokens == 46
    assert loaded.usage.turns == 4
    assert loaded.steps["inspect"].status == "completed"
    output = loaded.entry(loaded.steps["report"].output_entry or 0)
    assert output is not None and output.content == "Report: the release counter stands at 2."
    # The step prompt had its input placeholder filled in.
    report_prompt = next(e for e in loaded.transcript if e.role == "user" and e.step == "report")
    assert "the team" in report_prompt.content
    assert not report.edited_entries


def test_the_budget_stops_a_run_and_a_raised_limit_resumes_it(project: Path) -> None:
    run, path = start(project, limits=Limits(max_turns=2))
    assert run.status == "budget_exhausted"
    assert "2 of 2 turns" in (run.reason or "")
    assert counter_lines(project) == 2  # the second turn's tool calls did run
    outcome = resume_run(path, RunOptions(limits=Limits(max_turns=10)))
    assert outcome.run.status == "completed"
    assert counter_lines(project) == 2  # nothing ran twice
    note = [e for e in outcome.run.transcript if e.role == "note"]
    assert len(note) == 1 and "budget_exhausted" in note[0].content


def _stop_with_call_in_flight(project: Path, tool: str = "bump") -> Path:
    """A run stopped as if killed while ``tool`` (a call of the second reply) was running."""
    _, path = start(project, limits=Limits(max_turns=2))
    store, loaded, _ = ProgressStore.open(path)
    try:
        call = next(e for e in loaded.transcript[5:] if e.role == "tool_call" and e.tool == tool)
        result = next(
            e for e in loaded.transcript if e.role == "tool_result" and e.call_id == call.call_id
        )
        # Drop this call's result and everything after it; record the call as in flight.
        del loaded.transcript[result.id - 1 :]
        from promptflow_resume.progress.model import InFlight
        from promptflow_resume.progress.seal import Key, seal_calls

        loaded.in_flight = [
            InFlight(call.call_id or "", tool, "inspect", call.id, loaded.created, tool == "peek")
        ]
        # As flow left it: the calls recorded from the reply keep their seals until their
        # results are recorded.
        seal_calls(loaded, Key.ensure(), loaded.transcript[call.id - 1 :])
        loaded.status = "interrupted"
        store.checkpoint(loaded)
    finally:
        store.close()
    return path


def test_a_non_idempotent_call_in_flight_needs_review(project: Path) -> None:
    path = _stop_with_call_in_flight(project)
    with pytest.raises(NeedsReviewError, match="bump"):
        resume_run(path)
    run, _ = load_progress(path)
    assert run.status == "needs_review"
    assert run.transcript[-1].content == PLACEHOLDER_RESULT
    assert counter_lines(project) == 2  # the in-flight bump was not run again
    # Resuming again without a decision does not add a second placeholder.
    with pytest.raises(NeedsReviewError):
        resume_run(path)
    assert load_progress(path)[0].transcript[-1].content == PLACEHOLDER_RESULT
    assert sum(e.content == PLACEHOLDER_RESULT for e in load_progress(path)[0].transcript) == 1


def test_a_result_written_by_hand_is_used(project: Path) -> None:
    path = _stop_with_call_in_flight(project)
    with pytest.raises(NeedsReviewError):
        resume_run(path)
    text = path.read_text(encoding="utf-8")
    assert text.count(PLACEHOLDER_RESULT) == 1
    path.write_text(text.replace(PLACEHOLDER_RESULT, "2"), encoding="utf-8")
    outcome = resume_run(path, RunOptions(limits=Limits(max_turns=10)))
    assert outcome.run.status == "completed"
    assert counter_lines(project) == 2
    results = [e for e in outcome.run.transcript if e.role == "tool_result" and e.tool == "bump"]
    assert results[-1].content == "2" and not results[-1].is_error


def test_rerun_unsafe_runs_the_call_again(project: Path) -> None:
    path = _stop_with_call_in_flight(project)
    outcome = resume_run(
        path,
        RunOptions(limits=Limits(max_turns=10)),
        ResumeRequest(choices=Choices(rerun_unsafe=True)),
    )
    assert outcome.run.status == "completed"
    assert counter_lines(project) == 3  # asked for explicitly


def test_an_idempotent_call_in_flight_is_run_again(project: Path) -> None:
    path = _stop_with_call_in_flight(project, "peek")
    outcome = resume_run(path, RunOptions(limits=Limits(max_turns=10)))
    assert outcome.run.status == "completed"
    assert counter_lines(project) == 2  # bump's result was recorded: it did not run again
    peeks = [e for e in outcome.run.transcript if e.role == "tool_result" and e.tool == "peek"]
    assert len(peeks) == 1 and peeks[0].content.count("bumped") == 2
    assert any("running it again" in n for n in outcome.notes)


def test_an_edited_message_is_what_the_model_sees_next(project: Path) -> None:
    run, path = start(project, limits=Limits(max_turns=3))
    assert run.status == "budget_exhausted"
    text = path.read_text(encoding="utf-8")
    old = "The counter was bumped twice and now holds two lines."
    assert old in text
    path.write_text(text.replace(old, "The counter holds exactly two lines."), encoding="utf-8")
    status = run_status(path)
    assert status.load.edited_entries
    outcome = resume_run(path, RunOptions(limits=Limits(max_turns=10)))
    assert outcome.run.status == "completed"
    edited = outcome.run.entry(outcome.run.steps["inspect"].output_entry or 0)
    assert edited is not None and edited.content == "The counter holds exactly two lines."


def test_a_change_to_a_step_not_started_is_taken(project: Path) -> None:
    _, path = start(project, limits=Limits(max_turns=3))
    workflow = project / "counter.prompt.md"
    workflow.write_text(
        workflow.read_text().replace("Write a short report", "Write a one-line report"),
        encoding="utf-8",
    )
    outcome = resume_run(path, RunOptions(limits=Limits(max_turns=10)))
    assert outcome.run.status == "completed"
    prompt = next(e for e in outcome.run.transcript if e.role == "user" and e.step == "report")
    assert "one-line report" in prompt.content
    assert any("report changed before it started" in n for n in outcome.notes)


def test_a_change_to_a_completed_step_needs_a_decision(project: Path) -> None:
    _, path = start(project, limits=Limits(max_turns=3))
    before = path.read_bytes()
    workflow = project / "counter.prompt.md"
    workflow.write_text(
        workflow.read_text().replace("Bump the counter twice", "Bump the counter once"),
        encoding="utf-8",
    )
    with pytest.raises(WorkflowChangedError, match="inspect") as info:
        resume_run(path)
    assert path.read_bytes() == before  # nothing written
    # The message names the workflow file, and its sentences are separate.
    assert f"the workflow {workflow} changed in steps that already ran" in str(info.value)
    assert "what is left). Nothing was changed in the progress file." in str(info.value)
    kept = resume_run(
        path,
        RunOptions(limits=Limits(max_turns=10)),
        ResumeRequest(choices=Choices(keep_completed=True)),
    )
    assert kept.run.status == "completed"
    assert counter_lines(project) == 2


def test_rerun_changed_reruns_from_the_first_changed_step(project: Path) -> None:
    _, path = start(project, limits=Limits(max_turns=3))
    workflow = project / "counter.prompt.md"
    workflow.write_text(
        workflow.read_text().replace("Bump the counter twice", "Bump the counter twice, carefully"),
        encoding="utf-8",
    )
    outcome = resume_run(
        path,
        RunOptions(limits=Limits(max_turns=10)),
        ResumeRequest(choices=Choices(rerun_changed=True)),
    )
    assert outcome.run.status == "completed"
    assert counter_lines(project) == 4  # the step ran again, as asked
    assert any("archived" in n for n in outcome.notes)
    archives = list((path.parent).glob("progress.files/archive-*"))
    assert archives, "archived entries must be kept beside the file"


def test_a_step_set_back_to_pending_by_hand_runs_again(project: Path) -> None:
    _, path = start(project)
    text = path.read_text(encoding="utf-8")
    store, loaded, _ = ProgressStore.open(path)
    try:
        loaded.steps["report"].status = "pending"
        store.checkpoint(loaded)
    finally:
        store.close()
    assert path.read_text(encoding="utf-8") != text
    outcome = resume_run(path)
    assert outcome.run.status == "completed"
    reports = [e for e in outcome.run.transcript if e.role == "user" and e.step == "report"]
    assert len(reports) == 1  # the old attempt was archived, not duplicated
    assert counter_lines(project) == 2


def test_a_second_writer_is_refused_with_the_owner_named(project: Path) -> None:
    _, path = start(project, limits=Limits(max_turns=1))
    store, _, _ = ProgressStore.open(path)
    try:
        with pytest.raises(RunLockedError, match=r"pid"):
            resume_run(path)
    finally:
        store.close()


def test_secrets_never_reach_the_files(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-proj-Zq8xV3kLmN0pQrStUvWxYz0123456789abcd"
    monkeypatch.setenv("RELEASE_API_KEY", secret)
    script = project / "counter.script.yaml"
    script.write_text(
        script.read_text().replace("holds two lines.", f"holds two lines. Key: {secret}"),
        encoding="utf-8",
    )
    run, path = start(project, inputs={"audience": f"ops {secret}"})
    assert run.status == "completed"
    for file in path.parent.rglob("*"):
        if file.is_file():
            assert secret.encode() not in file.read_bytes(), file
    assert run.redactions.count >= 2


HUMAN = """---
description: Ask a person, then act on the answer
provider: scripted
commands:
  version:
    description: Print the version
    argv: ["echo", "1.4.2"]
    idempotent: true
---
## Step 1: Version
> run: version

## Step 2: Approve
> kind: human

Version ${step:version} is ready. Should it be released?

## Step 3: Announce
Announce the release of ${step:version} if it was approved.
"""


def test_a_human_step_waits_for_an_answer_written_in_the_file(workdir: Path) -> None:
    (workdir / "h.prompt.md").write_text(HUMAN, encoding="utf-8")
    # Reply 0 stands for the command step: the conversation shows its call as an assistant turn.
    (workdir / "h.yaml").write_text('replies: ["-", "Announced 1.4.2."]\n', encoding="utf-8")
    outcome = start_run(
        StartRequest(
            workdir / "h.prompt.md",
            recording=workdir / "h.yaml",
            progress=workdir / "r" / "progress.md",
        )
    )
    assert outcome.run.status == "awaiting_input" and outcome.exit_code == 11
    question = outcome.run.transcript[-1]
    assert question.role == "user" and "Version 1.4.2 is ready." in question.content

    again = resume_run(outcome.path)  # nobody answered yet: it stops at the same place
    assert again.run.status == "awaiting_input"
    assert sum(e.step == "approve" for e in again.run.transcript) == 1

    path = outcome.path
    text = path.read_text(encoding="utf-8")
    from promptflow_resume.run.humananswers import ANSWER_PLACEHOLDER, answer_line

    # The line named to the person is the placeholder's, in the body (not the front matter).
    line = answer_line(path)
    assert line is not None and ANSWER_PLACEHOLDER in text.splitlines()[line - 1]
    assert text.splitlines()[: line - 1].count("---") == 2
    path.write_text(text.replace(ANSWER_PLACEHOLDER, "Yes, ship it."), encoding="utf-8")
    assert answer_line(path) is None
    done = resume_run(path)
    assert done.run.status == "completed"
    announce = next(e for e in done.run.transcript if e.role == "user" and e.step == "announce")
    assert "Announce the release of 1.4.2" in announce.content
    answer = done.run.entry(done.run.steps["approve"].output_entry or 0)
    assert answer is not None and answer.content.endswith("Yes, ship it.")


def test_transient_errors_are_retried_and_noted(project: Path) -> None:
    script = project / "counter.script.yaml"
    script.write_text(
        script.read_text() + "failures:\n  0: {transient: true, status: 503, retry_after: 0}\n",
        encoding="utf-8",
    )
    run, _ = start(project)
    assert run.status == "completed"
    assert any("retry 1" in note for note in run.attempts[0].notes)


def test_a_permanent_error_fails_the_run_and_resume_continues(project: Path) -> None:
    script = project / "counter.script.yaml"
    script.write_text(
        script.read_text()
        + "failures:\n  2: {transient: false, status: 401, message: bad key}\nstate: s.json\n",
        encoding="utf-8",
    )
    run, path = start(project)
    assert run.status == "failed" and run.last_error is not None
    assert "bad key" in run.last_error.message
    assert counter_lines(project) == 2
    outcome = resume_run(path)
    assert outcome.run.status == "completed"
    assert counter_lines(project) == 2  # the tool calls before the failure were not repeated
    assert [a.status for a in outcome.run.attempts] == ["failed", "completed"]


def _edit_front_matter(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    head, sep, body = text.partition("\n---\n")
    assert old in head, f"{old!r} not in the front matter"
    path.write_text(head.replace(old, new, 1) + sep + body, encoding="utf-8")


def test_an_input_edited_in_the_front_matter_is_used_by_later_steps(project: Path) -> None:
    _, path = start(project, limits=Limits(max_turns=3))
    _edit_front_matter(path, "audience: the team", "audience: the release board")
    outcome = resume_run(path, RunOptions(limits=Limits(max_turns=10)))
    prompt = next(e for e in outcome.run.transcript if e.role == "user" and e.step == "report")
    assert "for the release board" in prompt.content


def test_set_overrides_an_input_and_is_recorded(project: Path) -> None:
    _, path = start(project, limits=Limits(max_turns=3))
    outcome = resume_run(
        path,
        RunOptions(limits=Limits(max_turns=10)),
        ResumeRequest(set_values={"audience": "auditors"}),
    )
    prompt = next(e for e in outcome.run.transcript if e.role == "user" and e.step == "report")
    assert "for auditors" in prompt.content
    assert "--set audience" in outcome.run.attempts[-1].notes


def test_a_cursor_moved_back_by_hand_reruns_from_there(project: Path) -> None:
    _, path = start(project)
    _edit_front_matter(path, "cursor: {index: 2,", "cursor: {step: inspect, index: 1,")
    status = run_status(path)
    assert status.plan is not None and status.plan.reset == ["inspect", "report"]
    outcome = resume_run(path, request=ResumeRequest(choices=Choices(rerun_unsafe=True)))
    assert outcome.run.status == "completed"
    assert counter_lines(project) == 4  # the bumps of the re-run step ran again, as asked for
    assert sum(e.role == "user" and e.step == "inspect" for e in outcome.run.transcript) == 1
    assert list((path.parent / "progress.files").glob("archive-attempt-*.json"))


def test_the_time_limit_stops_a_run_as_timeout(workdir: Path) -> None:
    for name in ("slow.prompt.md", "slow.script.yaml"):
        shutil.copy(FIXTURES / name, workdir / name)
    outcome = start_run(
        StartRequest(
            workdir / "slow.prompt.md",
            recording=workdir / "slow.script.yaml",
            progress=workdir / "t" / "progress.md",
        ),
        RunOptions(limits=Limits(timeout=0.5)),
    )
    assert outcome.run.status == "timeout" and outcome.exit_code == 1
    resumed = resume_run(outcome.path)
    assert resumed.run.status == "completed"
