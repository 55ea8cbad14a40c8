"""One value decides whether a run can resume: ``ResumePlan.stop`` (and ``stop`` in
``flow status --json``); ``blocked`` says the same in words, and ``can_resume`` follows it.

The runs are real: the worktree workflow run by ``flow`` in a git repository, killed after its
first step or run to the end, then discarded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promptflow_resume.api import RunOptions, run_status
from promptflow_resume.run.resumeplan import ResumePlan, Stop
from tests.run.test_worktree import PROGRESS, RUN, _repo
from tests.support.flowproc import flow, flow_env


def _status(repo: Path) -> dict[str, Any]:
    done = flow("status", PROGRESS, "--json", cwd=repo)
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def _one_stop(data: dict[str, Any]) -> None:
    """``can_resume`` is false exactly when ``stop`` names why, and then ``blocked`` says it."""
    assert data["can_resume"] is (data["stop"] is None)
    if data["stop"] is not None:
        assert data["blocked"]


@pytest.mark.parametrize("killed", [True, False], ids=["stopped", "completed"])
def test_a_discarded_worktree_stops_the_plan_by_one_value(tmp_path: Path, killed: bool) -> None:
    repo = _repo(tmp_path / "repo")
    env = flow_env(FLOW_CRASH_AT="engine.step_completed:1") if killed else None
    ran = flow(*RUN, cwd=repo, env=env)
    assert ran.returncode == (-9 if killed else 0), ran.stderr
    before = _status(repo)
    _one_stop(before)
    assert before["stop"] == (None if killed else "completed")
    discarded = flow("discard", PROGRESS, cwd=repo)
    assert discarded.returncode == 0, discarded.stderr

    after = _status(repo)
    _one_stop(after)
    assert after["stop"] == "discarded" and after["can_resume"] is False
    assert "discarded (flow discard)" in after["blocked"]
    report = run_status(repo / PROGRESS, RunOptions(workspace=repo))
    assert report.plan is not None and report.plan.stop is Stop.DISCARDED
    assert not report.plan.can_resume and not report.can_resume
    assert report.state.resumable is False
    text = flow("status", PROGRESS, cwd=repo).stdout
    if killed:
        assert "resume   blocked: the run's worktree and branch were discarded" in text
    else:
        assert "resume   nothing to do: the run is completed" in text


def test_a_run_without_its_workflow_stops_by_value_too(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    ran = flow(*RUN, cwd=repo, env=flow_env(FLOW_CRASH_AT="engine.step_completed:1"))
    assert ran.returncode == -9, ran.stderr
    (repo / "change.prompt.md").unlink()
    data = _status(repo)
    _one_stop(data)
    assert data["stop"] == "workflow_error" and data["blocked"] == data["workflow_error"]


def test_block_sets_the_value_and_the_words_together() -> None:
    plan = ResumePlan()
    assert plan.can_resume and plan.stop is None and plan.blocked is None
    plan.block(Stop.NEEDS_REVIEW, "a tool call needs review")
    assert not plan.can_resume
    assert (plan.stop, plan.blocked) == (Stop.NEEDS_REVIEW, "a tool call needs review")
    document = plan.to_dict()
    assert list(document)[:2] == ["can_resume", "blocked"]
    assert document["can_resume"] is False and document["stop"] == "needs_review"
    with pytest.raises(AttributeError):
        plan.can_resume = True  # type: ignore[misc]
