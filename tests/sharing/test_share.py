"""``flow share``: a copy that is safe in a pull request and resumes elsewhere."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from promptflow_resume.base import yamlio
from promptflow_resume.base.errors import InputError
from promptflow_resume.progress import ProgressStore, journal_path, load_progress, validate_file
from promptflow_resume.progress.model import Entry
from promptflow_resume.sharing import share
from tests.support.share import (
    clone,
    conversation,
    make_project,
    resume,
    snapshot,
    start,
)

SECRET = "tok-9f8e7d6c5b4a39281706"


@pytest.fixture
def project(workdir: Path) -> Path:
    return make_project(workdir / "repo")


def _front_matter(path: Path) -> dict[str, object]:
    text = path.read_text(encoding="utf-8")
    data = yamlio.load(text[4 : text.index("\n---\n") + 1])
    assert isinstance(data, dict)
    return data


def test_a_shared_copy_resumes_in_a_fresh_clone_like_an_uninterrupted_run(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The reference: the same workflow run once without stopping, in its own folder.
    reference = make_project(tmp_path / "reference")
    monkeypatch.chdir(reference)
    full, _ = start(reference)
    assert full.status == "completed"

    monkeypatch.chdir(project)
    stopped, path = start(project, max_turns=3)
    assert stopped.status == "budget_exhausted"
    result = share(path, project / "shared" / "release-run.md")
    assert (project / "shared" / "release-run.files").is_dir()

    elsewhere = clone(project, tmp_path / "elsewhere" / "clone")
    monkeypatch.chdir(elsewhere)
    copy = elsewhere / "shared" / "release-run.md"
    finished = resume(copy, elsewhere)

    assert finished.status == "completed"
    assert conversation(finished) == conversation(full)
    # The non-idempotent bump ran once, before the share; the clone did not run it again.
    assert (elsewhere / "counter.txt").read_text() == "bumped\n"
    assert result.workflow_path == "../release.prompt.md"


def test_the_copy_has_relative_paths_a_resume_header_and_validates_cleanly(project: Path) -> None:
    _, path = start(project, max_turns=3)
    before = snapshot(path.parent)
    result = share(path, project / "docs" / "runs" / "release.md")
    out = result.output

    assert snapshot(path.parent) == before  # the original is only read
    text = out.read_text(encoding="utf-8")
    assert str(project) not in text and str(project.resolve()) not in text
    fm = _front_matter(out)
    assert fm["workflow"]["path"] == "../../release.prompt.md"  # type: ignore[index]
    assert fm["config"]["recording"] == "../../release.script.yaml"  # type: ignore[index]
    assert (out.parent / "../../release.prompt.md").resolve() == (project / "release.prompt.md")
    # The header is a blockquote at the top of the body: shown on GitHub, ignored by every
    # reader, and it says what the file is and how to resume.
    body = text[text.index("\n---\n\n") + 6 :]
    header = body[: body.index("\n\n")].split("\n")
    assert 3 <= len(header) <= 5 and all(line.startswith("> ") for line in header)
    assert "Shared copy of a flow run" in header[0]
    assert any("flow resume release.md" in line for line in header)
    assert MarkdownIt("commonmark").parse(body)[0].type == "blockquote_open"
    report = validate_file(out)
    assert report.warnings == [] and report.edited_entries == []


def test_sidecars_are_bundled_beside_the_copy_and_verified(project: Path) -> None:
    _, path = start(project, max_turns=3)
    result = share(path, project / "shared" / "run.md")
    assert result.bundled == ["run.files/call_1_1-listing"]
    run, _ = load_progress(result.output)  # verifies every sidecar's sha256
    entry = next(e for e in run.transcript if e.sidecar is not None)
    original = (path.parent / "progress.files" / "call_1_1-listing").read_bytes()
    assert (result.output.parent / entry.sidecar).read_bytes() == original  # type: ignore[operator]
    assert entry.sidecar_bytes == len(original)


def test_secrets_unknown_when_the_run_was_written_are_redacted_from_the_copy_and_its_sidecars(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project(workdir / "repo", notes=f"deploy with {SECRET}\n")
    monkeypatch.delenv("RELEASE_TOKEN", raising=False)
    _, path = start(project, max_turns=3, inputs={"audience": f"ops ({SECRET})"})
    assert SECRET in path.read_text(encoding="utf-8")  # nothing marked it secret back then

    monkeypatch.setenv("RELEASE_TOKEN", SECRET)
    result = share(path, project / "shared" / "run.md")

    files = [result.output, *sorted((project / "shared" / "run.files").iterdir())]
    for file in files:
        assert SECRET not in file.read_text(encoding="utf-8"), file
    assert "[REDACTED:RELEASE_TOKEN]" in result.output.read_text(encoding="utf-8")
    assert result.redacted >= 3  # the input, the draft prompt, the sidecar (and its preview)
    run, _ = load_progress(result.output)  # the sidecar's new sha256 was recorded
    assert run.redactions.count >= result.redacted
    assert "inputs" in run.redactions.where
    assert SECRET in path.read_text(encoding="utf-8")  # the original is not changed


def test_hand_edits_in_the_original_stay_marked_as_edits_in_the_copy(project: Path) -> None:
    _, path = start(project, max_turns=3)
    text = path.read_text(encoding="utf-8")
    path.write_text(
        text.replace("The counter holds one line.", "The counter holds ONE line."),
        encoding="utf-8",
    )
    _, report = load_progress(path)
    assert report.edited_entries == [11]

    result = share(path, project / "shared" / "run.md")
    copy, copy_report = load_progress(result.output)
    assert copy_report.edited_entries == [11]
    assert copy.transcript[10].content == "The counter holds ONE line."
    assert result.edited_entries == [11]


def test_an_existing_copy_is_replaced_only_with_force(project: Path) -> None:
    _, path = start(project, max_turns=3)
    target = project / "shared" / "run.md"
    share(path, target)
    with pytest.raises(InputError, match="already exists") as caught:
        share(path, target)
    assert "--force" in str(caught.value)
    resume(path, project)
    result = share(path, target, force=True)
    assert load_progress(result.output)[0].status == "completed"


def test_sharing_onto_the_run_itself_is_refused(project: Path) -> None:
    _, path = start(project, max_turns=3)
    with pytest.raises(InputError, match="overwrite the run itself"):
        share(path, path, force=True)


def test_the_default_output_is_named_after_the_run_in_the_working_directory(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, path = start(project, max_turns=3)
    monkeypatch.chdir(project)
    result = share(path)
    assert result.output == project / "r1.md"
    assert result.output.is_file() and (project / "r1.files").is_dir()


def test_home_folder_paths_are_reported_or_scrubbed(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home" / "alice"
    monkeypatch.setenv("HOME", str(home))
    _, path = start(project, max_turns=3, inputs={"audience": f"{home}/team"})

    plain = share(path, project / "plain.md")
    assert any("home folder" in w for w in plain.warnings)
    assert any("absolute path" in w for w in plain.warnings)
    assert str(home) in plain.output.read_text(encoding="utf-8")

    scrubbed = share(path, project / "scrubbed.md", scrub_home=True)
    text = scrubbed.output.read_text(encoding="utf-8")
    assert str(home) not in text and "~/team" in text
    assert scrubbed.home_paths >= 2  # the input and the draft prompt that quotes it


def test_a_workflow_outside_the_repository_of_the_copy_is_warned_about(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = make_project(tmp_path / "outside")
    monkeypatch.chdir(outside)
    _, path = start(outside, max_turns=3)
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    result = share(path, repo / "run.md")
    assert any("outside the repository" in w for w in result.warnings)
    assert os.path.exists(repo / "run.md")


def test_a_crashed_run_is_shared_with_the_events_its_journal_holds(project: Path) -> None:
    _, path = start(project, max_turns=3)
    store, run, _ = ProgressStore.open(path)
    entry = Entry(id=run.next_entry_id(), role="assistant", content="Drafting now.", step="draft")
    run.transcript.append(entry)
    store.save(run, [entry])
    store.close()  # no checkpoint: as if the process died after the journal append
    assert journal_path(path).exists()
    journal = journal_path(path).read_bytes()

    result = share(path, project / "shared.md")
    copy, _ = load_progress(result.output)
    assert copy.transcript[-1].content == "Drafting now."
    assert not journal_path(result.output).exists()
    assert journal_path(path).read_bytes() == journal  # the original's journal is left as is


def test_archived_entries_travel_with_the_copy_and_the_history_points_at_them(
    project: Path,
) -> None:
    _, path = start(project)
    text = path.read_text(encoding="utf-8")
    path.write_text(
        text.replace("  report:\n    status: completed", "  report:\n    status: pending", 1),
        encoding="utf-8",
    )
    resume(path, project)  # re-runs report; its old entries are archived by the resume
    archives = sorted((path.parent / "progress.files").glob("archive-attempt-*"))
    assert len(archives) == 1

    result = share(path, project / "shared" / "run.md")
    copied = project / "shared" / "run.files" / archives[0].name
    assert copied.read_bytes() == archives[0].read_bytes()
    run, _ = load_progress(result.output)
    notes = [n for a in run.attempts for n in a.notes if "archived to" in n]
    assert notes and all(f"run.files/{archives[0].name}" in n for n in notes)
    assert "progress.files" not in result.output.read_text(encoding="utf-8")


HUMAN_WORKFLOW = """\
---
description: Summarize a plan and ask for approval
provider: echo
---
You are careful.

## Step 1: Summarize
Summarize the plan.

## Step 2: Approve
> kind: human

Does the summary match what you expected? Answer yes or no, with a reason.
"""


def test_a_question_is_answered_in_the_shared_copy_and_the_clone_resumes_with_it(
    workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from promptflow_resume.api import RunOptions, StartRequest, resume_run, start_run
    from promptflow_resume.run.humananswers import ANSWER_PLACEHOLDER

    project = workdir / "repo"
    project.mkdir()
    (project / "approve.prompt.md").write_text(HUMAN_WORKFLOW, encoding="utf-8")
    stopped = start_run(
        StartRequest(project / "approve.prompt.md", progress=project / "run" / "progress.md")
    )
    assert stopped.run.status == "awaiting_input"
    copy = share(stopped.path, project / "review" / "approval.md").output

    # The reviewer answers in the pull request; a fresh clone resumes the shared copy.
    elsewhere = clone(project, tmp_path / "clone")
    answered = elsewhere / "review" / "approval.md"
    again = resume_run(answered, RunOptions(workspace=elsewhere))
    assert again.run.status == "awaiting_input"  # no answer yet: it stops at the same place
    text = answered.read_text(encoding="utf-8")
    answered.write_text(text.replace(ANSWER_PLACEHOLDER, "Yes, it matches."), encoding="utf-8")
    monkeypatch.chdir(elsewhere)
    done = resume_run(answered, RunOptions(workspace=elsewhere)).run

    assert done.status == "completed"
    output = done.entry(done.steps["approve"].output_entry or 0)
    assert output is not None and output.content.endswith("Answer: Yes, it matches.")
    assert ANSWER_PLACEHOLDER in copy.read_text(encoding="utf-8")  # the committed copy as shared
