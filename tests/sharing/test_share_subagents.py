"""``flow share`` and ``flow fork`` of a run with subagent calls carry the calls' child runs.

Real ``flow`` processes against the local OpenAI-protocol server, with the agents of
tests/run/test_subagents.py: the lead calls the helper, flow is killed while the helper's
second model call is on the wire, the run is shared, and the copy, moved to another folder,
resumes inside the copied helper run (its first turn is not sent again). A fork keeps the
completed subagent run of the step before the fork point as a copy linked to the fork.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.run.test_subagents import (
    CHILD_FILE,
    _kill_when,
    _project,
    _replies,
    _run_args,
)
from tests.support.flowproc import flow, provider_env, spawn, transcript
from tests.support.providers_server import (
    Canned,
    ModelServer,
    openai_completion,
    openai_tool_call,
    openai_usage,
)

SHARED_CHILD = Path("shared") / "run.steps" / "task" / "agents" / "call_lead_1" / "progress.md"


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv


def _status(where: Path, path: str) -> dict[str, Any]:
    result = flow("status", "--json", path, cwd=where, env=provider_env())
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_a_shared_run_cut_off_inside_a_subagent_resumes_inside_the_copied_child(
    tmp_path: Path, server: ModelServer
) -> None:
    reference = _project(tmp_path / "reference")
    server.push(*_replies())
    assert flow(*_run_args(server), cwd=reference, env=provider_env()).returncode == 0
    child_ref = [e[:2] for e in transcript(reference / CHILD_FILE)]
    server.requests.clear()

    where = _project(tmp_path / "p")
    server.push(*_replies(delay_at=2)[:3])
    proc = spawn(*_run_args(server), cwd=where, env=provider_env())
    _kill_when(proc, server, 3)  # the helper's answer is on the wire; its first turn is durable

    shared = flow("share", "run/progress.md", "-o", "shared/run.md", "--json", cwd=where)
    assert shared.returncode == 0, shared.stderr
    report = json.loads(shared.stdout)
    assert report["children"] == [SHARED_CHILD.relative_to("shared").as_posix()]
    child_text = (where / SHARED_CHILD).read_text(encoding="utf-8")
    assert "Shared copy of a flow subagent run" in child_text
    assert "path: ../../../../run.md" in child_text and "kind: agent" in child_text
    assert "sk-test-not-a-key" not in child_text

    # The copy goes to another folder with the agents; the original run is gone.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copytree(where / "agents", elsewhere / "agents")
    shutil.copytree(where / "shared", elsewhere / "shared")
    shutil.rmtree(where)
    data = _status(elsewhere, "shared/run.md")
    [child] = data["children"]
    assert (child["agent"], child["call"], child["status"]) == (
        "helper",
        "call_lead_1",
        "interrupted",
    )
    assert Path(child["path"]) == SHARED_CHILD

    server.requests.clear()
    server.push(*_replies()[2:])
    result = flow(
        "resume",
        "shared/run.md",
        "--agents",
        "agents",
        "--base-url",
        server.url + "/v1",
        "--trust-calls",  # a shared copy carries no seals (docs/spec.md 10.1)
        cwd=elsewhere,
        env=provider_env(),
    )
    assert result.returncode == 0, result.stderr
    # Only the helper's cut-off call and the lead's last: the helper's first turn (its think
    # call) was not sent again, and no new helper run was started.
    assert len(server.requests) == 2
    resent = server.requests[0].body["messages"]
    assert [m.get("tool_call_id") for m in resent if m["role"] == "tool"] == ["call_helper_1"]
    assert [e[:2] for e in transcript(elsewhere / SHARED_CHILD)] == child_ref
    assert not (elsewhere / "shared" / "progress.steps").exists()
    data = _status(elsewhere, "shared/run.md")
    assert data["status"] == "completed"
    [child] = data["children"]
    assert child["status"] == "completed"
    assert data["usage"]["turns"] == 4 and data["usage_total"] == data["usage"]


#: A prompt file whose first step calls the helper and whose second reports.
TWO_STEPS = """\
---
description: Count with a helper, then report
model: gpt-4o
tools: ['agent']
---
## Step 1: Count {#count}
How many bees? Ask the helper.

## Step 2: Report {#report}
Report the count in one line.
"""


def test_a_fork_keeps_the_subagent_runs_of_the_steps_it_keeps(
    tmp_path: Path, server: ModelServer
) -> None:
    where = _project(tmp_path / "p")
    (where / "count.prompt.md").write_text(TWO_STEPS, encoding="utf-8")
    call = json.dumps({"agent": "helper", "task": "Count the bees."})
    bodies = [
        openai_completion(None, [openai_tool_call("call_c", "run_agent", call)]),
        openai_completion("There are 3 bees.", usage=openai_usage(50, 5)),
        openai_completion("3 bees."),
        openai_completion("Report: 3 bees."),
    ]
    server.push(*(Canned(body=b) for b in bodies))
    args = ["count.prompt.md", "--agents", "agents", "--provider", "openai"]
    started = flow(
        "run",
        *args,
        "--base-url",
        server.url + "/v1",
        "--progress",
        "run/progress.md",
        "--new",
        cwd=where,
        env=provider_env(),
    )
    assert started.returncode == 0, started.stderr
    original = _status(where, "run/progress.md")
    [child] = original["children"]
    assert child["status"] == "completed"

    forked = flow(
        "fork", "run/progress.md", "--at", "report", "-o", "forked/run.md", "--json", cwd=where
    )
    assert forked.returncode == 0, forked.stderr
    copy = Path("forked") / "run.steps" / "count" / "agents" / "call_c" / "progress.md"
    assert json.loads(forked.stdout)["children"] == [copy.relative_to("forked").as_posix()]
    data = _status(where, "forked/run.md")
    [child] = data["children"]
    assert (child["agent"], child["status"], Path(child["path"])) == (
        "helper",
        "completed",
        copy,
    )
    assert child["usage"]["input_tokens"] == 50
    assert child["run_id"] != original["children"][0]["run_id"]
    text = (where / copy).read_text(encoding="utf-8")
    assert f"run_id: {data['run_id']}" in text and "path: ../../../../run.md" in text

    server.requests.clear()
    server.push(Canned(body=openai_completion("Report again: 3 bees.")))
    result = flow(
        "resume", "forked/run.md", "--agents", "agents", "--base-url", server.url + "/v1",
        cwd=where, env=provider_env(),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert len(server.requests) == 1  # only the report: the helper's run is read back
    assert _status(where, "forked/run.md")["children"][0]["status"] == "completed"
