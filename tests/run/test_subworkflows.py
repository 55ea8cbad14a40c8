"""Sub-workflows (docs/spec.md 4.10): a step that runs another workflow as a child run.

The runs here use the offline ``scripted`` provider, which answers a request with
``replies[k]``, k = the assistant messages already in it. Parent and child are separate
conversations, so with the workflows below the calls go: plan (k=0) → child look (k=0) →
child judge (k=1) → report (k=1: the workflow step's call joins the plan's reply, as a command
step's does).
"""

from __future__ import annotations

import json
from pathlib import Path

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
from promptflow_resume.base.errors import InputError, WorkflowChangedError, WorkflowError
from promptflow_resume.progress import load_progress
from promptflow_resume.run.resumeplan import Choices
from promptflow_resume.workflow import check_workflow, load_workflow
from tests import support
from tests.support.flowproc import flow, transcript

PARENT = """\
---
description: Review a topic with a sub-workflow
inputs:
  topic: {type: string}
---
You review things.

## Step 1: Plan
Plan a review of ${input:topic}.

## Step 2: Review {#review}
> workflow: review.prompt.md
> inputs: plan=${step:plan}, topic="the ${input:topic}"

This text is for readers.

## Step 3: Report
Report on: ${step:review}
"""

CHILD = """\
---
description: Judge a plan
inputs:
  plan: {type: string}
  topic: {type: string}
---
You judge plans.

## Step 1: Look
Look at this plan for ${input:topic}: ${input:plan}

## Step 2: Judge
Judge it in one line.
"""

SCRIPT = """\
replies:
  - content: "alpha"
    usage: {input_tokens: 10, output_tokens: 1}
  - content: "beta"
    usage: {input_tokens: 20, output_tokens: 2}
  - content: "gamma"
    usage: {input_tokens: 30, output_tokens: 3}
"""


@pytest.fixture
def project(workdir: Path) -> Path:
    (workdir / "parent.prompt.md").write_text(PARENT, encoding="utf-8")
    (workdir / "review.prompt.md").write_text(CHILD, encoding="utf-8")
    (workdir / "script.yaml").write_text(SCRIPT, encoding="utf-8")
    return workdir


def _start(where: Path, limits: Limits = Limits(), name: str = "run") -> Path:
    outcome = start_run(
        StartRequest(
            where / "parent.prompt.md",
            GivenInputs({"topic": "bees"}),
            recording=where / "script.yaml",
            progress=where / name / "progress.md",
        ),
        RunOptions(provider="scripted", workspace=where, limits=limits),
    )
    return outcome.path


def _child_path(parent: Path) -> Path:
    return parent.parent / "progress.steps" / "review" / "progress.md"


# --- loading and checking -----------------------------------------------------------------


def test_workflow_step_is_loaded_with_its_child(project: Path) -> None:
    wf = load_workflow(project / "parent.prompt.md")
    review = wf.step("review")
    assert review is not None and review.kind == "workflow"
    assert review.workflow == "review.prompt.md"
    assert review.workflow_inputs == {"plan": "${step:plan}", "topic": "the ${input:topic}"}
    assert review.child is not None and review.child.name == "review"
    # ${step:plan} and ${input:topic} in the inputs line are known variables of the parent.
    assert ("step", "plan", "review") in {(v.kind, v.name, v.step) for v in wf.variables}


def test_a_changed_child_is_a_changed_step(project: Path) -> None:
    before = load_workflow(project / "parent.prompt.md")
    child = project / "review.prompt.md"
    child.write_text(CHILD.replace("one line", "two lines"), encoding="utf-8")
    after = load_workflow(project / "parent.prompt.md")
    changed = [a.id for a, b in zip(after.steps, before.steps, strict=True) if a.hash != b.hash]
    assert changed == ["review"]
    assert after.hash != before.hash
    # A cosmetic edit of the child (trailing spaces) changes nothing.
    child.write_text(CHILD.replace("one line.", "one line.   "), encoding="utf-8")
    assert load_workflow(project / "parent.prompt.md").step("review") == before.step("review")


@pytest.mark.parametrize(
    ("inputs", "expected"),
    [
        ("plan=x, topic=y, colour=red", "has no input `colour`"),
        ("plan=x", "needs the input `topic`"),
    ],
)
def test_inputs_must_match_the_childs_inputs(project: Path, inputs: str, expected: str) -> None:
    text = PARENT.replace('plan=${step:plan}, topic="the ${input:topic}"', inputs)
    (project / "parent.prompt.md").write_text(text, encoding="utf-8")
    _wf, diagnostics = check_workflow(project / "parent.prompt.md")
    errors = [d for d in diagnostics if d.severity == "error"]
    assert len(errors) == 1 and expected in errors[0].message
    assert (errors[0].line, errors[0].column) == (13, 3)


def test_a_missing_child_and_an_unknown_variable_are_reported(project: Path) -> None:
    text = PARENT.replace("review.prompt.md", "nothere.prompt.md")
    (project / "parent.prompt.md").write_text(text, encoding="utf-8")
    with pytest.raises(WorkflowError, match=r"sub-workflow `nothere\.prompt\.md` does not exist"):
        load_workflow(project / "parent.prompt.md")
    text = PARENT.replace("${step:plan}", "${step:report}")
    (project / "parent.prompt.md").write_text(text, encoding="utf-8")
    with pytest.raises(WorkflowError, match=r"step:report\} refers to a later step"):
        load_workflow(project / "parent.prompt.md")


def test_cycles_are_refused_with_the_chain(project: Path) -> None:
    (project / "a.prompt.md").write_text("## Step 1: Go\n> workflow: b.prompt.md\n")
    (project / "b.prompt.md").write_text("# B\n\n## Step 1: Back\n> workflow: a.prompt.md\n")
    (project / "self.prompt.md").write_text("## Step 1: Me\n> workflow: self.prompt.md\n")
    result = flow("check", "a.prompt.md", cwd=project)
    assert result.returncode == 4
    first = "a.prompt.md:2:3: error: the sub-workflow `b.prompt.md` cannot be loaded"
    assert first in result.stdout
    assert "b.prompt.md:4:3: workflow cycle: a.prompt.md → b.prompt.md → a.prompt.md" in (
        result.stdout
    )
    result = flow("check", "self.prompt.md", "--json", cwd=project)
    assert result.returncode == 4
    [problem] = json.loads(result.stdout)["workflows"][0]["diagnostics"]
    assert problem["code"] == "workflow-cycle" and problem["line"] == 2
    assert "workflow cycle: self.prompt.md → self.prompt.md" in problem["message"]
    # flow run refuses it before any run exists.
    result = flow("run", "a.prompt.md", "--provider", "echo", cwd=project)
    assert result.returncode == 4 and "workflow cycle" in result.stderr
    assert not (project / ".flow").exists()


def test_check_shows_the_step_in_the_plan(project: Path) -> None:
    result = flow("check", "parent.prompt.md", cwd=project)
    assert result.returncode == 0, result.stdout
    assert "workflow: review.prompt.md · inputs: plan=${step:plan}" in result.stdout
    result = flow("check", "parent.prompt.md", "--json", cwd=project)
    step = json.loads(result.stdout)["workflows"][0]["steps"][1]
    assert step["kind"] == "workflow" and step["workflow"] == "review.prompt.md"
    assert step["workflow_hash"] == load_workflow(project / "review.prompt.md").hash


# --- running -------------------------------------------------------------------------------


def test_parent_and_child_run_end_to_end(project: Path) -> None:
    parent_path = _start(project)
    parent, _ = load_progress(parent_path)
    assert parent.status == "completed"
    child_path = _child_path(parent_path)
    child, _ = load_progress(child_path)
    assert child.status == "completed"

    # Linked both ways.
    assert parent.steps["review"].child == "progress.steps/review/progress.md"
    assert child.parent == {
        "path": "../../progress.md",
        "run_id": parent.run_id,
        "step": "review",
        "kind": "workflow",
    }
    # The child got its inputs, variables filled in, and ran its own steps.
    assert child.inputs == {"plan": "alpha", "topic": "the bees"}
    assert [(e.role, e.step, e.content) for e in child.transcript] == [
        ("system", None, "You judge plans."),
        ("user", "look", "## Look\n\nLook at this plan for the bees: alpha"),
        ("assistant", "look", "alpha"),
        ("user", "judge", "## Judge\n\nJudge it in one line."),
        ("assistant", "judge", "beta"),
    ]
    # Its final output is the step's output, used by the next step.
    rows = [(e.role, e.step, e.tool, e.content) for e in parent.transcript]
    assert rows[3][:3] == ("tool_call", "review", "workflow")
    assert json.loads(rows[3][3]) == {
        "workflow": "review.prompt.md",
        "inputs": {"plan": "alpha", "topic": "the bees"},
    }
    assert rows[4] == ("tool_result", "review", "workflow", "beta")
    assert rows[5] == ("user", "report", None, "## Report\n\nReport on: beta")
    assert rows[6] == ("assistant", "report", None, "beta")
    # Usage rolls up: the step holds the child's, the run all four calls.
    assert parent.steps["review"].usage.to_dict() == child.usage.to_dict()
    assert child.usage.turns == 2 and child.usage.input_tokens == 30
    assert parent.usage.turns == 4 and parent.usage.input_tokens == 60
    assert parent.usage.output_tokens == 6
    # The state section of the parent's body links the child.
    text = parent_path.read_text(encoding="utf-8")
    assert "- step `review`: `progress.steps/review/progress.md`" in text
    assert "| **Part of** | step review of run " in child_path.read_text(encoding="utf-8")


def test_the_childs_budget_is_capped_by_the_parents(project: Path) -> None:
    reference = _start(project, name="reference")
    path = _start(project, Limits(max_turns=2))
    parent, _ = load_progress(path)
    child, _ = load_progress(_child_path(path))
    # The plan used 1 of 2 turns: the child may use 1, and stops before its second call.
    assert child.config.budget == {"max_turns": 1}
    assert child.status == "budget_exhausted" and child.usage.turns == 1
    assert parent.status == "budget_exhausted"
    assert parent.reason is not None and parent.reason.startswith(
        "in the sub-workflow of step 'review' (progress.steps/review/progress.md): turn budget"
    )
    assert parent.usage.turns == 2 and parent.steps["review"].usage.turns == 1

    outcome = resume_run(path, RunOptions(limits=Limits(max_turns=10), workspace=project))
    assert outcome.exit_code == 0
    assert transcript(path) == transcript(reference)
    assert transcript(_child_path(path)) == transcript(_child_path(reference))
    parent, _ = load_progress(path)
    assert parent.usage.turns == 4 and parent.usage.input_tokens == 60
    child, _ = load_progress(_child_path(path))
    assert child.config.budget == {"max_turns": 9}


def test_status_and_list_show_the_tree(project: Path) -> None:
    path = _start(project, Limits(max_turns=2))
    data = run_status(path, RunOptions(workspace=project)).to_dict()
    [child] = data["children"]
    assert child["step"] == "review" and child["status"] == "budget_exhausted"
    assert (child["steps_done"], child["steps_total"]) == (1, 2)
    assert child["usage"]["turns"] == 1 and child["children"] == []
    assert data["usage_total"] == data["usage"]  # a stopped child is rolled up
    assert "parent" not in data
    child_data = run_status(_child_path(path), RunOptions(workspace=project)).to_dict()
    assert child_data["parent"]["step"] == "review"

    result = flow("status", str(path), cwd=project)
    assert "  review: budget_exhausted — turn budget used: 1 of 1 turns" in result.stdout
    result = flow("list", "--all", "--json", "run", cwd=project)
    runs = json.loads(result.stdout)
    assert [r["path"] for r in runs] == [str(path)]
    assert runs[0]["children"][0]["run_id"] == load_progress(_child_path(path))[0].run_id
    result = flow("list", "--all", "run", cwd=project)
    lines = result.stdout.splitlines()
    assert lines[2].lstrip().startswith("└ ") and "step review" in lines[2]


def test_a_childs_file_is_resumed_through_its_parent(project: Path) -> None:
    path = _start(project, Limits(max_turns=2))
    child = _child_path(path)
    before = child.read_bytes()
    with pytest.raises(InputError, match="resumed through that run") as info:
        resume_run(child, RunOptions(workspace=project))
    assert info.value.hint == f"Run `flow resume {path}`."
    result = flow("resume", str(child), cwd=project)
    assert result.returncode == 9 and "is the run of a sub-workflow" in result.stderr
    assert child.read_bytes() == before


# --- changed child workflows -------------------------------------------------------------


def test_a_child_not_started_is_taken_as_it_is_now(project: Path) -> None:
    path = _start(project, Limits(max_turns=1))
    # The budget was used up by the plan: the step stopped before its child existed.
    stopped, _ = load_progress(path)
    assert not any(e.step == "review" for e in stopped.transcript)
    assert stopped.steps["review"].child is None and not _child_path(path).exists()
    child_file = project / "review.prompt.md"
    child_file.write_text(CHILD.replace("one line", "two lines"), encoding="utf-8")
    outcome = resume_run(path, RunOptions(limits=Limits(max_turns=10), workspace=project))
    assert outcome.exit_code == 0
    assert "step review changed before it started; using the new text" in outcome.notes
    child, _ = load_progress(_child_path(path))
    assert child.transcript[3].content == "## Judge\n\nJudge it in two lines."


def test_a_completed_child_follows_the_changed_workflow_rules(project: Path) -> None:
    path = _start(project, Limits(max_turns=3))
    parent, _ = load_progress(path)
    assert parent.status == "budget_exhausted" and parent.steps["review"].status == "completed"
    child_file = project / "review.prompt.md"
    child_file.write_text(CHILD.replace("one line", "two lines"), encoding="utf-8")
    old_child = _child_path(path).read_bytes()

    # Without a decision: exit 7 naming the step, nothing changed.
    with pytest.raises(WorkflowChangedError, match="review"):
        resume_run(path, RunOptions(limits=Limits(max_turns=10), workspace=project))
    assert _child_path(path).read_bytes() == old_child

    # Keep what was recorded: the child is only read back, the parent goes on.
    kept = project / "kept"
    kept.mkdir()
    for name in ("progress.md",):
        (kept / name).write_bytes(path.read_bytes())
    (kept / "progress.steps" / "review").mkdir(parents=True)
    _child_path(kept / "progress.md").write_bytes(old_child)
    outcome = resume_run(
        kept / "progress.md",
        RunOptions(limits=Limits(max_turns=10), workspace=project),
        ResumeRequest(choices=Choices(keep_completed=True)),
    )
    assert outcome.exit_code == 0
    assert _child_path(kept / "progress.md").read_bytes() == old_child

    # Re-run it: the old child is set aside (nothing deleted), a new one runs the new text.
    outcome = resume_run(
        path,
        RunOptions(limits=Limits(max_turns=10), workspace=project),
        ResumeRequest(choices=Choices(rerun_changed=True)),
    )
    assert outcome.exit_code == 0
    archived = path.parent / "progress.steps" / "review.archive-1" / "progress.md"
    assert archived.read_bytes() == old_child
    child, _ = load_progress(_child_path(path))
    assert child.status == "completed"
    assert child.transcript[3].content == "## Judge\n\nJudge it in two lines."


def test_a_child_changed_while_it_runs_continues_with_keep_completed(project: Path) -> None:
    path = _start(project, Limits(max_turns=2))  # stops inside the child, before "judge"
    child_file = project / "review.prompt.md"
    child_file.write_text(CHILD.replace("one line", "two lines"), encoding="utf-8")
    with pytest.raises(WorkflowChangedError):
        resume_run(path, RunOptions(limits=Limits(max_turns=10), workspace=project))
    outcome = resume_run(
        path,
        RunOptions(limits=Limits(max_turns=10), workspace=project),
        ResumeRequest(choices=Choices(keep_completed=True)),
    )
    assert outcome.exit_code == 0
    child, _ = load_progress(_child_path(path))
    # The child's own step that had not started takes the new text; "look" is kept.
    assert [e.content for e in child.transcript if e.role == "user"] == [
        "## Look\n\nLook at this plan for the bees: alpha",
        "## Judge\n\nJudge it in two lines.",
    ]
    assert any("judge changed before it started" in n for n in child.attempts[-1].notes)


def test_the_example_runs_offline(tmp_path: Path) -> None:
    # The child is answered by the triage's recorded session: its requests are the ones a
    # run of triage-todos.prompt.md on its own sends, so they match the recording.
    root = support.REPO
    result = flow(
        "run",
        "workflows/release-check.prompt.md",
        "--recording",
        "workflows/triage-todos.recording.jsonl",
        "--progress",
        str(tmp_path / "progress.md"),
        "--new",
        "--no-snapshots",  # the workspace is this repository itself
        cwd=root,
    )
    assert result.returncode == 0, result.stderr
    assert "Triage › step 2/2 Prioritise: started" in result.stderr
    parent, _ = load_progress(tmp_path / "progress.md")
    child_file = tmp_path / "progress.steps" / "triage" / "progress.md"
    child, _ = load_progress(child_file)
    results = [e.content for e in child.transcript if e.role == "tool_result"]
    assert "inventory.py:" in results[0]  # the child's own grep tool really ran
    assert parent.transcript[-1].content == child.transcript[-1].content
    assert "Task list" in parent.transcript[-1].content
    assert parent.usage.to_dict() == child.usage.to_dict()
    # The child records the recording it was answered from, relative to its own folder.
    recording = (child_file.parent / (child.config.recording or "")).resolve()
    assert recording == (root / "workflows" / "triage-todos.recording.jsonl").resolve()


def test_a_question_in_the_child_is_answered_in_the_childs_file(workdir: Path) -> None:
    (workdir / "ship.prompt.md").write_text(
        "## Step 1: Ask {#ask}\n> workflow: approve.prompt.md\n\n## Step 2: Use\nUse ${step:ask}.\n"
    )
    (workdir / "approve.prompt.md").write_text("## Step 1: Approve\n> kind: human\n\nShip it?\n")
    args = ("--provider", "echo", "--progress", "run/progress.md", "--new")
    result = flow("run", "ship.prompt.md", *args, cwd=workdir)
    assert result.returncode == 11
    child = workdir / "run" / "progress.steps" / "ask" / "progress.md"
    assert f"Write the answer at {child.relative_to(workdir)}:" in result.stderr
    parent, _ = load_progress(workdir / "run" / "progress.md")
    assert parent.status == "awaiting_input"
    text = child.read_text(encoding="utf-8")
    child.write_text(text.replace("WRITE YOUR ANSWER HERE, then run flow resume", "yes, ship"))
    result = flow("resume", "run/progress.md", cwd=workdir)
    assert result.returncode == 0, result.stderr
    parent, _ = load_progress(workdir / "run" / "progress.md")
    prompts = [e.content for e in parent.transcript if e.role == "user"]
    # A human step's output is its entry, question and answer, in a child as anywhere.
    assert prompts == ["## Use\n\nUse Ship it?\n\nAnswer: yes, ship."]
