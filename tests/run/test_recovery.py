"""Recovery decisions (``flow resume --decide``) and a person's ``--retry-step``/``--skip-step``.

The ambiguous states are made for real: a ``flow run`` SIGKILLed right after a command that is
not idempotent ran (``FLOW_CRASH_AT=engine.tool_ran:1``), and a run whose provider failed. The
model's decisions come from the scripted provider's ``decisions:`` list.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from promptflow_resume.progress import load_progress
from promptflow_resume.progress.model import Run, Usage
from promptflow_resume.providers.provider import Reply
from promptflow_resume.run.reconcile import CONTINUED_RESULT, PLACEHOLDER_RESULT
from promptflow_resume.run.recovery import Ambiguity, Choice, Situation, read_answer
from tests import support
from tests.support.flowproc import flow, flow_env

FIXTURES = support.FIXTURES / "engine"
RUN = (
    "run",
    "counter.prompt.md",
    "--recording",
    "counter.script.yaml",
    "--progress",
    "run/progress.md",
    "--new",
)
PROGRESS = "run/progress.md"


def _decision(choice: str, reason: str = "checked the state") -> str:
    return json.dumps({"choice": choice, "reason": reason})


def _with_decisions(where: Path, *answers: str, usage: dict[str, int] | None = None) -> None:
    """The counter script with ``decisions:`` answering recovery requests in order."""
    script = (FIXTURES / "counter.script.yaml").read_text(encoding="utf-8")
    items = [{"content": a, **({"usage": usage} if usage else {})} for a in answers]
    script += "decisions: " + json.dumps(items) + "\n"
    (where / "counter.script.yaml").write_text(script, encoding="utf-8")


def _crashed(where: Path, *answers: str, front: str = "") -> Path:
    """A run SIGKILLed after the first (non-idempotent) ``bump`` ran, before its result."""
    where.mkdir()
    workflow = (FIXTURES / "counter.prompt.md").read_text(encoding="utf-8")
    if front:
        workflow = workflow.replace("provider: scripted\n", f"provider: scripted\n{front}\n")
    (where / "counter.prompt.md").write_text(workflow, encoding="utf-8")
    shutil.copy(FIXTURES / "counter.script.yaml", where / "counter.script.yaml")
    _with_decisions(where, *answers)
    first = flow(*RUN, cwd=where, env=flow_env(FLOW_CRASH_AT="engine.tool_ran:1"))
    assert first.returncode == -9, first.stderr
    run, _ = load_progress(where / PROGRESS)
    assert [f.tool for f in run.in_flight] == ["bump"]
    return where


def _bumps(where: Path) -> int:
    return len((where / "counter.txt").read_text().splitlines())


def _run(where: Path) -> Run:
    return load_progress(where / PROGRESS)[0]


def _decisions(run: Run) -> list[str]:
    return [e.content for e in run.transcript if e.role == "decision"]


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


# --- the model decides a call in flight ----------------------------------------------------


def test_sigkilled_run_resolved_by_decide_continue(tmp_path: Path) -> None:
    where = _crashed(tmp_path / "w", _decision("continue", "the bump only appends a line"))
    _with_decisions(
        where, _decision("continue", "the bump only appends a line"), usage={"input_tokens": 40}
    )
    result = flow("resume", PROGRESS, "--decide", cwd=where)
    assert result.returncode == 0, result.stderr
    assert "recovery decision: continue — the bump only appends a line" in result.stderr
    assert _bumps(where) == 2  # the crashed bump was not run again; the model's second one ran
    run = _run(where)
    assert run.status == "completed"
    (text,) = _decisions(run)
    assert text.splitlines()[:2] == [
        "- choice: continue",
        "- reason: the bump only appends a line",
    ]
    assert "bump (call_0_0)" in text
    results = [e for e in run.transcript if e.role == "tool_result" and e.call_id == "call_0_0"]
    assert [(e.content, e.is_error) for e in results] == [(CONTINUED_RESULT, True)]
    # The scripted replies take 700 input tokens; the decision's call 40 more.
    assert run.usage.input_tokens == 740
    assert run.attempts[-1].usage.input_tokens == 40 + 150 + 200 + 250


def test_decide_retry_runs_the_step_again(tmp_path: Path) -> None:
    where = _crashed(tmp_path / "w", _decision("retry", "bumping again is what the task asks"))
    result = flow("resume", PROGRESS, "--decide", cwd=where)
    assert result.returncode == 0, result.stderr
    assert _bumps(where) == 3  # the crashed bump, then the retried step's two
    run = _run(where)
    assert [s.status for s in run.steps.values()] == ["completed", "completed"]
    assert _decisions(run)[0].startswith("- choice: retry\n")
    assert list((where / "run").glob("**/archive-attempt-2.json"))
    assert "step 'inspect' runs again from its start (retry)" in result.stderr


def test_decide_skip_marks_the_step_skipped(tmp_path: Path) -> None:
    where = _crashed(tmp_path / "w", _decision("skip", "the counter does not matter"))
    # With step 1's entries archived the report is the conversation's first reply.
    script = (where / "counter.script.yaml").read_text(encoding="utf-8")
    start, end = script.index('  - content: "I will'), script.index('  - content: "Report')
    (where / "counter.script.yaml").write_text(script[:start] + script[end:], encoding="utf-8")
    result = flow("resume", PROGRESS, "--decide", cwd=where)
    assert result.returncode == 0, result.stderr
    run = _run(where)
    assert run.steps["inspect"].status == "skipped"
    assert run.steps["report"].status == "completed"
    assert run.status == "completed"
    assert _bumps(where) == 1
    assert [e.step for e in run.transcript if e.role == "tool_call"] == []


def test_decide_ask_stops_needs_review(tmp_path: Path) -> None:
    where = _crashed(tmp_path / "w", _decision("ask", "I cannot tell whether the bump landed"))
    result = flow("resume", PROGRESS, "--decide", cwd=where)
    assert result.returncode == 8, result.stderr
    run = _run(where)
    assert run.status == "needs_review"
    assert "recovery decision is to ask a person: I cannot tell" in (run.reason or "")
    assert any(e.content == PLACEHOLDER_RESULT for e in run.transcript)
    assert _decisions(run)[0].startswith("- choice: ask\n")
    assert _bumps(where) == 1


@pytest.mark.parametrize(
    "answer",
    [
        "continue",
        '{"choice": "maybe", "reason": "x"}',
        '{"choice": "continue"}',
        '{"choice": "continue", "reason": "x", "step": "inspect"}',
        '["continue", "x"]',
        '{"choice": "continue", "reason": ""}',
    ],
)
def test_malformed_decision_is_refused(answer: str) -> None:
    situation = Situation(Ambiguity.IN_FLIGHT, "inspect", "a call was in flight", tuple(Choice))
    decision = read_answer(Reply(content=answer), situation, Usage())
    assert decision.choice is Choice.ASK
    assert decision.refused


def test_impossible_decision_is_refused() -> None:
    allowed = (Choice.CONTINUE, Choice.RETRY, Choice.ASK)
    situation = Situation(Ambiguity.WORKFLOW_CHANGED, "inspect", "steps changed", allowed)
    decision = read_answer(Reply(content=_decision("skip")), situation, Usage())
    assert (decision.choice, decision.refused) == (Choice.ASK, "skip is not possible here")
    fenced = read_answer(
        Reply(content="```json\n" + _decision("retry") + "\n```"), situation, Usage()
    )
    assert (fenced.choice, fenced.refused) == (Choice.RETRY, None)


def test_malformed_decision_falls_back_to_needs_review(tmp_path: Path) -> None:
    where = _crashed(tmp_path / "w", "I would just carry on, I think.")
    result = flow("resume", PROGRESS, "--decide", cwd=where)
    assert result.returncode == 8, result.stderr
    assert "Traceback" not in result.stderr
    run = _run(where)
    assert run.status == "needs_review"
    assert "recovery decision was refused (the answer is not one JSON object)" in (run.reason or "")
    (text,) = _decisions(run)
    assert text.splitlines()[:3] == [
        "- choice: ask",
        "- refused: the answer is not one JSON object; a person decides (needs_review)",
        "- answer: I would just carry on, I think.",
    ]
    assert _bumps(where) == 1


def test_a_failed_decision_call_falls_back_to_needs_review(tmp_path: Path) -> None:
    where = _crashed(tmp_path / "w")  # the script has no decisions: the model call fails
    result = flow("resume", PROGRESS, "--decide", cwd=where)
    assert result.returncode == 8, result.stderr
    (text,) = _decisions(_run(where))
    assert "the script has 0 decisions" in text
    assert text.splitlines()[1].startswith("- refused: the model call failed: ")
    assert _bumps(where) == 1


def test_plan_decide_shows_the_decision_and_writes_nothing(tmp_path: Path) -> None:
    where = _crashed(tmp_path / "w", _decision("retry", "safe to bump again"))
    before = _files(where)
    result = flow("resume", PROGRESS, "--plan", "--decide", cwd=where)
    assert result.returncode == 0, result.stderr
    assert "decision retry — safe to bump again" in result.stdout
    assert "not applied (--plan)" in result.stdout
    assert "steps that run again: inspect" in result.stdout
    as_json = flow("resume", PROGRESS, "--plan", "--decide", "--json", cwd=where)
    data = json.loads(as_json.stdout)
    assert data["decision"]["choice"] == "retry"
    assert data["decision"]["situation"] == "in_flight"
    assert _files(where) == before  # every byte of every file, progress.md included


def test_a_hand_written_result_wins_over_decide(tmp_path: Path) -> None:
    where = _crashed(tmp_path / "w")  # no decisions: asking the model would be refused
    first = flow("resume", PROGRESS, cwd=where)
    assert first.returncode == 8  # needs_review stays the default
    path = where / PROGRESS
    path.write_text(path.read_text(encoding="utf-8").replace(PLACEHOLDER_RESULT, "1"), "utf-8")
    result = flow("resume", PROGRESS, "--decide", cwd=where)
    assert result.returncode == 0, result.stderr
    run = _run(where)
    assert _decisions(run) == []
    assert "result written by hand, used" in result.stderr
    assert _bumps(where) == 2


def test_a_command_line_choice_wins_over_decide(tmp_path: Path) -> None:
    where = _crashed(tmp_path / "w", _decision("skip", "never used"))
    result = flow("resume", PROGRESS, "--decide", "--rerun-unsafe", cwd=where)
    assert result.returncode == 0, result.stderr
    assert _decisions(_run(where)) == []
    assert _bumps(where) == 3


def test_recovery_model_in_the_workflow_decides_without_the_option(tmp_path: Path) -> None:
    where = _crashed(tmp_path / "w", _decision("retry", "safe"), front="recovery: model")
    plan = flow("resume", PROGRESS, "--plan", cwd=where)
    assert "decision" not in plan.stdout  # --plan alone makes no model call
    result = flow("resume", PROGRESS, cwd=where)
    assert result.returncode == 0, result.stderr
    assert _decisions(_run(where))[0].startswith("- choice: retry\n")


def test_workflow_recovery_key_is_checked(tmp_path: Path) -> None:
    (tmp_path / "w.prompt.md").write_text("---\nrecovery: robot\n---\nHello\n", "utf-8")
    result = flow("check", "w.prompt.md", cwd=tmp_path)
    assert result.returncode == 4, result.stdout + result.stderr
    assert "recovery" in result.stdout + result.stderr


# --- a failed step ---------------------------------------------------------------------------

TWO_STEPS = """---
provider: scripted
---
## Step 1: Draft
Draft a release note.

## Step 2: Polish
Polish this draft: ${step:draft}
"""


def _failed(where: Path, times: int, *answers: str) -> Path:
    where.mkdir()
    (where / "two.prompt.md").write_text(TWO_STEPS, encoding="utf-8")
    script = {
        "replies": ["Polished."],
        "failures": {
            0: {"transient": False, "message": "bad key", "reason": "auth", "times": times}
        },
        "state": "script.state.json",
        "decisions": list(answers),
    }
    (where / "two.script.json").write_text(json.dumps(script), encoding="utf-8")
    result = flow(
        "run", "two.prompt.md", "--recording", "two.script.json", "--progress", PROGRESS,
        "--new", cwd=where,
    )  # fmt: skip
    assert result.returncode == 10, result.stderr
    return where


def test_decide_skip_of_a_failed_step_and_its_output(tmp_path: Path) -> None:
    where = _failed(tmp_path / "w", 1, _decision("skip", "the draft keeps failing"))
    plan = flow("resume", PROGRESS, "--plan", "--decide", "--json", cwd=where)
    assert json.loads(plan.stdout)["decision"]["situation"] == "failed_step"
    result = flow("resume", PROGRESS, "--decide", cwd=where)
    assert result.returncode == 0, result.stderr
    run = _run(where)
    assert [s.status for s in run.steps.values()] == ["skipped", "completed"]
    prompts = [e.content for e in run.transcript if e.role == "user" and e.step == "polish"]
    assert prompts == ["## Polish\n\nPolish this draft: (step draft was skipped; it has no output)"]


def test_repeated_failure_is_its_own_situation(tmp_path: Path) -> None:
    where = _failed(tmp_path / "w", 2, _decision("ask", "a person should check the key"))
    again = flow("resume", PROGRESS, cwd=where)
    assert again.returncode == 10
    result = flow("resume", PROGRESS, "--decide", cwd=where)
    assert result.returncode == 8, result.stderr
    run = _run(where)
    assert run.status == "needs_review"
    (text,) = _decisions(run)
    assert "step draft failed 2 times in a row" in text
    # Stopped by that decision, the run is asked about again by the next --decide.
    script = json.loads((where / "two.script.json").read_text(encoding="utf-8"))
    script["decisions"] = [_decision("skip", "the key will not work today")]
    (where / "two.script.json").write_text(json.dumps(script), encoding="utf-8")
    skipped = flow("resume", PROGRESS, "--decide", cwd=where)
    assert skipped.returncode == 0, skipped.stderr
    run = _run(where)
    assert [s.status for s in run.steps.values()] == ["skipped", "completed"]
    assert len(_decisions(run)) == 1  # the first decision was archived with the step's entries


# --- a person's choices on the command line ----------------------------------------------


def test_retry_step_from_the_cli(tmp_path: Path) -> None:
    where = _crashed(tmp_path / "w")
    result = flow("resume", PROGRESS, "--retry-step", "inspect", cwd=where)
    assert result.returncode == 0, result.stderr
    assert _bumps(where) == 3
    assert "step 'inspect' runs again from its start (retry)" in result.stderr
    assert _decisions(_run(where)) == []


def test_skip_step_from_the_cli(tmp_path: Path) -> None:
    where = _failed(tmp_path / "w", 1)
    result = flow("resume", PROGRESS, "--skip-step", "draft", cwd=where)
    assert result.returncode == 0, result.stderr
    assert "step draft skipped" in result.stderr
    assert _run(where).steps["draft"].status == "skipped"
    again = flow("resume", PROGRESS, "--skip-step", "polish", cwd=where)
    assert again.returncode == 9
    assert "--skip-step polish: the step is completed; use --retry-step polish" in again.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--retry-step", "nosuch"), "--retry-step nosuch: the workflow has no step 'nosuch'"),
        (("--skip-step", "nosuch"), "--skip-step nosuch: the workflow has no step 'nosuch'"),
        (("--retry-step", "report"), "--retry-step report: the step has not run yet"),
        (
            ("--retry-step", "inspect", "--skip-step", "report"),
            "--retry-step and --skip-step exclude each other",
        ),
    ],
)
def test_step_choices_refused(tmp_path: Path, args: tuple[str, ...], words: str) -> None:
    where = _crashed(tmp_path / "w")
    before = _run(where)
    result = flow("resume", PROGRESS, *args, cwd=where)
    assert result.returncode == 9, result.stderr
    assert words in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr
    # Opening the run folds its journal into the file; the run itself is unchanged.
    after = _run(where)
    assert (after.transcript, after.steps, after.in_flight) == (
        before.transcript,
        before.steps,
        before.in_flight,
    )


# --- a changed workflow ----------------------------------------------------------------------


def _changed(where: Path, *answers: str) -> Path:
    """A run SIGKILLed right after step 1 completed, whose step 1 text then changed."""
    where.mkdir()
    shutil.copy(FIXTURES / "counter.prompt.md", where / "counter.prompt.md")
    _with_decisions(where, *answers)
    first = flow(*RUN, cwd=where, env=flow_env(FLOW_CRASH_AT="engine.step_completed:1"))
    assert first.returncode == -9, first.stderr
    workflow = where / "counter.prompt.md"
    text = workflow.read_text(encoding="utf-8")
    workflow.write_text(text.replace("then look at it.", "then look at it twice."), "utf-8")
    return where


def test_decide_continue_keeps_completed_steps_of_a_changed_workflow(tmp_path: Path) -> None:
    where = _changed(tmp_path / "w", _decision("continue", "the reworded step did its job"))
    plain = flow("resume", PROGRESS, cwd=where)
    assert plain.returncode == 7  # without --decide: a person chooses
    result = flow("resume", PROGRESS, "--decide", cwd=where)
    assert result.returncode == 0, result.stderr
    assert "step inspect changed after it ran; kept its recorded result" in result.stderr
    run = _run(where)
    assert run.status == "completed"
    assert _decisions(run)[0].startswith("- choice: continue\n")
    assert _bumps(where) == 2


def test_skip_is_impossible_for_a_changed_workflow(tmp_path: Path) -> None:
    where = _changed(tmp_path / "w", _decision("skip", "skip it"))
    result = flow("resume", PROGRESS, "--decide", cwd=where)
    assert result.returncode == 8, result.stderr
    run = _run(where)
    assert run.status == "needs_review"
    assert "- refused: skip is not possible here" in _decisions(run)[0]
    assert "recovery decision was refused (skip is not possible here)" in (run.reason or "")


# --- the library -----------------------------------------------------------------------------


def test_library_run_status_and_resume_run_with_decide(tmp_path: Path) -> None:
    from promptflow_resume import resume_run, run_status
    from promptflow_resume.api import ResumeRequest, RunOptions

    where = _crashed(tmp_path / "w", _decision("retry", "bumping is safe"))
    progress = where / PROGRESS
    status = run_status(progress, RunOptions(workspace=where), ResumeRequest(decide=True))
    assert status.decision is not None
    assert (status.decision.situation.kind, status.decision.choice) == (
        Ambiguity.IN_FLIGHT,
        Choice.RETRY,
    )
    assert status.plan is not None and status.plan.reset == ["inspect"]
    outcome = resume_run(progress, RunOptions(workspace=where), ResumeRequest(decide=True))
    assert outcome.exit_code == 0
    assert "recovery decision: retry — bumping is safe" in outcome.notes
    assert outcome.run.status == "completed"


def test_scripted_decisions_are_checked() -> None:
    from promptflow_resume.base.errors import ProviderSetupError
    from promptflow_resume.providers.scripted import parse_script

    script = parse_script({"replies": ["hi"], "decisions": [_decision("skip"), {"content": "x"}]})
    assert [d.content for d in script.decisions] == [_decision("skip"), "x"]
    with pytest.raises(ProviderSetupError, match="decisions"):
        parse_script({"replies": [], "decisions": "continue"})
    with pytest.raises(ProviderSetupError, match=r"decisions\[0\]"):
        parse_script({"replies": [], "decisions": [{"choice": "skip"}]})


def test_step_choices_are_refused_for_a_batch(tmp_path: Path) -> None:
    batch = tmp_path / "batch.md"
    text = "---\nflow_batch: 1\n---\n"
    batch.write_text(text, encoding="utf-8")
    result = flow("resume", "batch.md", "--decide", cwd=tmp_path)
    assert result.returncode == 9, result.stderr
    assert "batch.md is a batch; --decide, --retry-step and --skip-step apply to one run" in (
        " ".join(result.stderr.split())
    )
    assert batch.read_text(encoding="utf-8") == text
