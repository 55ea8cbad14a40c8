"""Sub-workflows survive SIGKILL: a real ``flow`` process is killed inside the child (while
the child's model call is on the wire) and at the parent's level after the child completed;
``flow resume`` of the parent then finishes with the transcripts of an uninterrupted run, and
the local OpenAI-protocol server sees no model call twice except the one that was cut off.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.flowproc import flow, flow_env, provider_env, spawn, transcript
from tests.support.providers_server import Canned, ModelServer, openai_completion, openai_usage
from tests.support.slow import sweep

PARENT = """\
---
provider: openai
model: gpt-4o
inputs:
  topic: {type: string}
---
You review things.

## Step 1: Plan
Plan a review of ${input:topic}.

## Step 2: Review {#review}
> workflow: review.prompt.md
> inputs: plan=${step:plan}

## Step 3: Report
Report on: ${step:review}
"""

CHILD = """\
---
inputs:
  plan: {type: string}
---
You judge plans.

## Step 1: Look
Look at this plan: ${input:plan}

## Step 2: Judge
Judge it in one line.
"""

#: The replies in the order the calls are made: plan, child look, child judge, report.
REPLIES = ("Plan: count the bees.", "The plan is short.", "Good enough.", "Report: good enough.")


def _reply(n: int, delay: float = 0.0) -> Canned:
    return Canned(
        body=openai_completion(REPLIES[n], usage=openai_usage(100 + n, 10 + n)), delay=delay
    )


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv


def _project(where: Path) -> Path:
    where.mkdir()
    (where / "parent.prompt.md").write_text(PARENT, encoding="utf-8")
    (where / "review.prompt.md").write_text(CHILD, encoding="utf-8")
    return where


def _run_args(server: ModelServer) -> tuple[str, ...]:
    return (
        "run",
        "parent.prompt.md",
        "--input",
        "topic=bees",
        "--base-url",
        server.url + "/v1",
        "--progress",
        "run/progress.md",
        "--new",
    )


CHILD_FILE = Path("run") / "progress.steps" / "review" / "progress.md"


def _kill_when(proc: subprocess.Popen[str], server: ModelServer, requests: int) -> None:
    """SIGKILL ``proc`` once the server has received ``requests`` requests."""
    deadline = time.monotonic() + 60
    while len(server.requests) < requests and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    assert len(server.requests) == requests
    os.kill(proc.pid, 9)
    proc.wait(timeout=30)


@pytest.fixture
def reference(tmp_path: Path, server: ModelServer) -> tuple[Path, list[object], list[object]]:
    where = _project(tmp_path / "reference")
    server.push(*(_reply(n) for n in range(4)))
    result = flow(*_run_args(server), cwd=where, env=provider_env())
    assert result.returncode == 0, result.stderr
    requests = len(server.requests)
    server.requests.clear()
    assert requests == 4
    return where, transcript(where / "run" / "progress.md"), transcript(where / CHILD_FILE)


def test_sigkill_inside_the_child_then_resume_the_parent(
    tmp_path: Path, server: ModelServer, reference: tuple[Path, list[object], list[object]]
) -> None:
    _, parent_ref, child_ref = reference
    where = _project(tmp_path / "killed")
    # The child's second call (judge) hangs on the wire; the process is killed meanwhile.
    server.push(_reply(0), _reply(1), _reply(2, delay=10))
    proc = spawn(*_run_args(server), cwd=where, env=provider_env())
    _kill_when(proc, server, 3)

    # What status sees: the parent is inside its child, which ran one call not rolled up yet.
    result = flow("status", "--json", "run/progress.md", cwd=where, env=provider_env())
    data = json.loads(result.stdout)
    [child] = data["children"]
    # The parent's file says running; its owner is gone, so it reads as interrupted.
    assert data["recorded_status"] == "running" and data["status"] == "interrupted"
    assert child["status"] == "interrupted"
    assert (child["steps_done"], child["usage"]["turns"]) == (1, 1)
    assert data["usage"]["turns"] == 1 and data["usage_total"]["turns"] == 2
    assert data["usage_total"]["input_tokens"] == 100 + 101

    server.push(_reply(2), _reply(3))
    result = flow(
        "resume", "run/progress.md", "--base-url", server.url + "/v1", cwd=where, env=provider_env()
    )
    assert result.returncode == 0, result.stderr
    assert transcript(where / "run" / "progress.md") == parent_ref
    assert transcript(where / CHILD_FILE) == child_ref
    # Only the call cut off was sent again (with the resume note after it); nothing else.
    bodies = [r.body["messages"] for r in server.requests]
    assert len(bodies) == 5
    assert bodies[3][: len(bodies[2])] == bodies[2]
    assert [m["role"] for m in bodies[3][len(bodies[2]) :]] == ["user"]
    assert "resumed" in bodies[3][-1]["content"]
    # The parent's own resume note comes before its next call, after the report's prompt.
    assert bodies[4][-2]["content"] == f"## Report\n\nReport on: {REPLIES[2]}"
    assert bodies[4][-1]["content"].startswith("Note from flow: this run was resumed")
    # Usage rolled up over both attempts: every reply counted once.
    parent = json.loads(flow("status", "--json", "run/progress.md", cwd=where).stdout)
    assert parent["usage"]["turns"] == 4
    assert parent["usage"]["input_tokens"] == 100 + 101 + 102 + 103
    assert parent["usage_total"] == parent["usage"]


def test_sigkill_after_the_child_completed_then_resume_the_parent(
    tmp_path: Path, server: ModelServer, reference: tuple[Path, list[object], list[object]]
) -> None:
    _, parent_ref, child_ref = reference
    where = _project(tmp_path / "killed")
    server.push(_reply(0), _reply(1), _reply(2), _reply(3, delay=10))
    proc = spawn(*_run_args(server), cwd=where, env=provider_env())
    _kill_when(proc, server, 4)
    child_bytes = (where / CHILD_FILE).read_bytes()
    assert "status: completed" in child_bytes.decode()

    server.push(_reply(3))
    result = flow(
        "resume", "run/progress.md", "--base-url", server.url + "/v1", cwd=where, env=provider_env()
    )
    assert result.returncode == 0, result.stderr
    assert transcript(where / "run" / "progress.md") == parent_ref
    assert transcript(where / CHILD_FILE) == child_ref
    # The completed child was only read back: its file is byte for byte the same.
    assert (where / CHILD_FILE).read_bytes() == child_bytes
    assert len(server.requests) == 5
    assert server.requests[4].body["messages"][-1]["role"] == "user"  # the resume note


def test_ctrl_c_inside_the_child_stops_both_then_resume_completes(
    tmp_path: Path, server: ModelServer, reference: tuple[Path, list[object], list[object]]
) -> None:
    _, parent_ref, child_ref = reference
    where = _project(tmp_path / "stopped")
    server.push(_reply(0), _reply(1, delay=10))
    proc = spawn(*_run_args(server), cwd=where, env=provider_env())
    deadline = time.monotonic() + 60
    while len(server.requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(proc.pid, 2)  # SIGINT, as Ctrl-C
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    data = json.loads(flow("status", "--json", "run/progress.md", cwd=where).stdout)
    assert data["status"] == "interrupted"
    assert data["reason"].startswith("in the sub-workflow of step 'review'")
    assert data["children"][0]["status"] == "interrupted"

    server.push(_reply(1), _reply(2), _reply(3))
    result = flow(
        "resume", "run/progress.md", "--base-url", server.url + "/v1", cwd=where, env=provider_env()
    )
    assert result.returncode == 0, result.stderr
    assert transcript(where / "run" / "progress.md") == parent_ref
    assert transcript(where / CHILD_FILE) == child_ref


# --- SIGKILL at named crash points, in parent and child alike ---------------------------------

SCRIPT = """\
replies:
  - content: "alpha"
    usage: {input_tokens: 10, output_tokens: 1}
  - content: "beta"
    usage: {input_tokens: 20, output_tokens: 2}
"""

SCRIPTED_RUN = (
    "run",
    "parent.prompt.md",
    "--provider",
    "scripted",
    "--recording",
    "script.yaml",
    "--input",
    "topic=bees",
    "--progress",
    "run/progress.md",
    "--new",
)

#: The points a run of these workflows passes (the crash points of tool calls are not on its
#: path); the two ``child`` points are the workflow step's own.
POINTS = (
    "engine.child_started",
    "engine.child_returned",
    "engine.model_replied",
    "engine.step_completed",
    "store.journal_after_fsync",
    "store.checkpoint_after_rename",
    "store.checkpoint_before_journal_remove",
)


def _scripted_project(where: Path) -> Path:
    _project(where)
    (where / "script.yaml").write_text(SCRIPT, encoding="utf-8")
    return where


@pytest.fixture(scope="module")
def scripted_reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, object]:
    where = _scripted_project(tmp_path_factory.mktemp("scripted") / "reference")
    result = flow(*SCRIPTED_RUN, cwd=where)
    assert result.returncode == 0, result.stderr
    return transcript(where / "run" / "progress.md"), transcript(where / CHILD_FILE)


@pytest.mark.parametrize(
    "point", sweep(POINTS, keep={"engine.child_started", "engine.child_returned"})
)
@pytest.mark.parametrize("n", sweep([1, 2, 3], keep={1}))
def test_sigkill_at_a_crash_point_then_resume(
    point: str, n: int, tmp_path: Path, scripted_reference: tuple[object, object]
) -> None:
    where = _scripted_project(tmp_path / "p")
    first = flow(*SCRIPTED_RUN, cwd=where, env=flow_env(FLOW_CRASH_AT=f"{point}:{n}"))
    assert first.returncode in (0, -9), first.stderr
    if n == 1:
        assert first.returncode == -9  # every point is on this run's path at least once
    progress = where / "run" / "progress.md"
    for _ in range(3):
        if not progress.exists():
            result = flow(*SCRIPTED_RUN, cwd=where)
        else:
            result = flow("resume", "run/progress.md", cwd=where)
        if result.returncode == 0:
            break
    assert result.returncode == 0, result.stderr
    assert (transcript(progress), transcript(where / CHILD_FILE)) == scripted_reference
    parent = json.loads(flow("status", "--json", "run/progress.md", cwd=where).stdout)
    # Four replies, each counted once however often the run was resumed.
    assert parent["usage"]["turns"] == 4 and parent["usage"]["input_tokens"] == 60
