"""Subagents: an agent calls another agent as a tool, and the call is a child run of its own.

Real ``flow`` processes against the local OpenAI-protocol server: a parent agent calls a
subagent that completes (its file is linked both ways, usage rolls up once); a SIGKILL while
the subagent's second model call is on the wire, then ``flow resume`` of the parent resumes
inside the child without redoing its first turn; an agent that is not offered (not in
``agents:``, or ``disable-model-invocation: true``) is never offered and a call naming it is
refused; a progress file edited to name another agent does not run it.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from promptflow_resume.base import clock
from tests.support.flowproc import flow, flow_env, provider_env, spawn, transcript
from tests.support.providers_server import (
    Canned,
    ModelServer,
    openai_completion,
    openai_tool_call,
    openai_usage,
)
from tests.support.slow import sweep

LEAD = """\
---
name: lead
description: Leads the work and hands parts of it to helpers.
model: gpt-4o
tools: ['agent']
agents: ['helper']
---
You lead. Hand counting to the helper.
"""

HELPER = """\
---
name: helper
description: Counts things carefully.
tools: ['think']
---
You count things.
"""

#: Another agent in the same folder: `lead` may not call it (not in its `agents:`).
OTHER = """\
---
name: other
description: Not one of the lead's agents.
---
You are the other agent.
"""

#: Hidden from every agent: `disable-model-invocation: true`.
HIDDEN = """\
---
name: hidden
description: Only people run this one.
disable-model-invocation: true
---
You are hidden.
"""

CALL = json.dumps({"agent": "helper", "task": "Count the bees."})
CHILD_FILE = Path("run") / "progress.steps" / "task" / "agents" / "call_lead_1" / "progress.md"


def _replies(delay_at: int | None = None) -> list[Canned]:
    """lead calls helper; helper thinks, then answers; lead reports (4 model calls)."""
    bodies: list[dict[str, Any]] = [
        openai_completion(
            None,
            [openai_tool_call("call_lead_1", "run_agent", CALL)],
            usage=openai_usage(100, 10),
        ),
        openai_completion(
            None,
            [openai_tool_call("call_helper_1", "think", json.dumps({"thought": "one by one"}))],
            usage=openai_usage(101, 11),
        ),
        openai_completion("There are 3 bees.", usage=openai_usage(102, 12)),
        openai_completion("Report: 3 bees.", usage=openai_usage(103, 13)),
    ]
    return [Canned(body=b, delay=10 if n == delay_at else 0.0) for n, b in enumerate(bodies)]


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv


def _project(where: Path, lead: str = LEAD) -> Path:
    agents = where / "agents"
    agents.mkdir(parents=True)
    (agents / "lead.agent.md").write_text(lead, encoding="utf-8")
    (agents / "helper.agent.md").write_text(HELPER, encoding="utf-8")
    (agents / "other.agent.md").write_text(OTHER, encoding="utf-8")
    (agents / "hidden.agent.md").write_text(HIDDEN, encoding="utf-8")
    return where


def _run_args(server: ModelServer) -> tuple[str, ...]:
    return (
        "run",
        "agents/lead.agent.md",
        "--task",
        "How many bees?",
        "--agents",
        "agents",
        "--provider",
        "openai",
        "--base-url",
        server.url + "/v1",
        "--progress",
        "run/progress.md",
        "--new",
    )


def _resume(where: Path, server: ModelServer, *extra: str) -> subprocess.CompletedProcess[str]:
    return flow(
        "resume",
        "run/progress.md",
        "--agents",
        "agents",
        "--base-url",
        server.url + "/v1",
        *extra,
        cwd=where,
        env=provider_env(),
    )


def _status(where: Path) -> dict[str, Any]:
    result = flow("status", "--json", "run/progress.md", cwd=where, env=provider_env())
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _kill_when(proc: subprocess.Popen[str], server: ModelServer, requests: int) -> None:
    """SIGKILL ``proc`` once the server has received ``requests`` requests."""
    deadline = time.monotonic() + 60
    while len(server.requests) < requests and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    assert len(server.requests) == requests
    os.kill(proc.pid, 9)
    proc.wait(timeout=30)


def _stop_when(proc: subprocess.Popen[str], server: ModelServer, requests: int) -> None:
    """Ctrl-C (SIGINT) ``proc`` once the server has received ``requests`` requests: both
    files are folded, so a person can edit them."""
    deadline = time.monotonic() + 60
    while len(server.requests) < requests and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(proc.pid, 2)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr


def test_a_subagent_call_is_a_linked_child_run_and_its_usage_rolls_up_once(
    tmp_path: Path, server: ModelServer
) -> None:
    where = _project(tmp_path / "p")
    server.push(*_replies())
    result = flow(*_run_args(server), cwd=where, env=provider_env())
    assert result.returncode == 0, result.stderr

    # The tool offered: only helper (not other, not hidden, not lead itself), described.
    [spec] = server.requests[0].body["tools"]
    function = spec["function"]
    assert function["name"] == "run_agent"
    assert function["parameters"]["properties"]["agent"]["enum"] == ["helper"]
    assert "helper: Counts things carefully." in function["description"]
    # The child got the task as its user message, the helper's body as its instructions.
    child_messages = server.requests[1].body["messages"]
    assert child_messages[0] == {"role": "system", "content": "You count things."}
    assert child_messages[-1]["content"] == "Count the bees."
    # The child's final answer is the call's result in the parent.
    assert server.requests[3].body["messages"][-1]["content"] == "There are 3 bees."

    # Linked both ways.
    parent_text = (where / "run" / "progress.md").read_text(encoding="utf-8")
    assert "call_lead_1:" in parent_text and "agent: helper" in parent_text
    child_text = (where / CHILD_FILE).read_text(encoding="utf-8")
    assert "kind: agent" in child_text and "call: call_lead_1" in child_text

    data = _status(where)
    assert data["status"] == "completed"
    # Every reply counted once: the parent's own two and the child's two.
    assert data["usage"]["turns"] == 4
    assert data["usage"]["input_tokens"] == 100 + 101 + 102 + 103
    assert data["usage_total"] == data["usage"]
    [child] = data["children"]
    assert (child["agent"], child["call"], child["status"]) == (
        "helper",
        "call_lead_1",
        "completed",
    )
    assert child["usage"]["turns"] == 2
    shown = flow("status", "run/progress.md", cwd=where, env=provider_env()).stdout
    assert "task › agent helper: completed" in shown and str(CHILD_FILE.name) in shown
    # The parent's Execution state section names the child's file.
    assert "call `call_lead_1`: agent `helper`" in parent_text

    # flow resume of the child itself is refused and names the parent.
    refused = flow("resume", str(CHILD_FILE), cwd=where, env=provider_env())
    assert refused.returncode != 0
    assert "subagent" in refused.stderr and "progress.md" in refused.stderr


def test_sigkill_inside_the_subagent_then_resume_the_parent_resumes_inside_it(
    tmp_path: Path, server: ModelServer
) -> None:
    reference = _project(tmp_path / "reference")
    server.push(*_replies())
    assert flow(*_run_args(server), cwd=reference, env=provider_env()).returncode == 0
    parent_ref = transcript(reference / "run" / "progress.md")
    child_ref = transcript(reference / CHILD_FILE)
    server.requests.clear()

    where = _project(tmp_path / "killed")
    # The helper's second call (its answer) hangs on the wire; flow is killed meanwhile, after
    # the helper's first turn and its think call are durable in the child's file.
    server.push(*_replies(delay_at=2)[:3])
    proc = spawn(*_run_args(server), cwd=where, env=provider_env())
    _kill_when(proc, server, 3)
    # The helper's first turn and its think call are durable (in the child's journal).
    assert [e[0] for e in transcript(where / CHILD_FILE)] == [
        "system",
        "user",
        "assistant",
        "tool_call",
        "tool_result",
    ]

    data = _status(where)
    assert data["status"] == "interrupted"
    [child] = data["children"]
    assert child["agent"] == "helper" and child["status"] == "interrupted"
    assert child["usage"]["turns"] == 1
    assert data["usage_total"]["turns"] == 2  # the parent's turn and the child's, not yet rolled
    assert data["resume_agents"] == ["call_lead_1"]
    shown = flow("status", "run/progress.md", cwd=where, env=provider_env()).stdout
    assert "subagent calls resumed inside their runs: call_lead_1" in shown
    assert "run again (idempotent)" not in shown

    server.requests.clear()
    server.push(*_replies()[2:])
    result = _resume(where, server)
    assert result.returncode == 0, result.stderr
    # Only the call that was cut off was sent again, then the parent's last: the child's first
    # turn was not redone, and the parent did not call the subagent again.
    assert len(server.requests) == 2
    resent = server.requests[0].body["messages"]
    assert [m.get("tool_call_id") for m in resent if m["role"] == "tool"] == ["call_helper_1"]
    assert transcript(where / CHILD_FILE) == child_ref
    assert transcript(where / "run" / "progress.md") == parent_ref
    data = _status(where)
    assert data["status"] == "completed"
    # Every reply counted once (the one cut off never arrived, so it was never counted).
    assert data["usage"]["turns"] == 4
    assert data["usage"]["input_tokens"] == 100 + 101 + 102 + 103
    assert data["usage_total"] == data["usage"]


#: Retries shorter than the test's quota window, so that the window suspends the run.
QUICK_RETRY = "retry:\n  max_attempts: 3\n  initial_delay: 0.01\n  max_delay: 0.2\n---\n"


def test_a_subagent_suspended_at_a_quota_window_suspends_its_parent_until_then(
    tmp_path: Path, server: ModelServer
) -> None:
    reference = _project(tmp_path / "reference")
    server.push(*_replies())
    assert flow(*_run_args(server), cwd=reference, env=provider_env()).returncode == 0
    server.requests.clear()

    where = _project(tmp_path / "suspended")
    helper = where / "agents" / "helper.agent.md"
    helper.write_text(HELPER.replace("---\nYou", QUICK_RETRY + "You", 1), encoding="utf-8")
    # flow (in this process) and the server read one clock that a wait moves on: an hour's
    # window passes at once, however slow the machine.
    with clock.using(clock.SteppedClock()) as now:
        server.close_window(3600.0, after=2)  # the helper's second call meets the window
        server.push(*_replies())
        result = flow(*_run_args(server), cwd=where, env=provider_env())
        assert result.returncode == 16, result.stderr
        data = _status(where)
        [child] = data["children"]
        assert (data["status"], child["status"]) == ("suspended", "suspended")
        assert data["until"] == _status_of(where / CHILD_FILE)["until"]
        assert "flow resume --wait" in result.stderr

        now.sleep(3000)
        early = _resume(where, server)
        assert early.returncode == 16, early.stderr  # before the window: nothing is sent
        assert "Nothing was sent" in early.stderr
        waited = _resume(where, server, "--wait")
        assert waited.returncode == 0, waited.stderr
        assert now.time() >= server.window_until  # --wait waited for the window, on this clock
    assert transcript(where / CHILD_FILE) == transcript(reference / CHILD_FILE)
    assert transcript(where / "run" / "progress.md") == transcript(
        reference / "run" / "progress.md"
    )
    # Two answered before the window, one refused, then the refused one and the parent's last.
    assert len(server.requests) == 5 and server.pending == 0


def _status_of(progress: Path) -> dict[str, Any]:
    result = flow("status", "--json", str(progress), cwd=progress.parent, env=provider_env())
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_an_agent_not_offered_is_never_run_and_the_call_is_refused(
    tmp_path: Path, server: ModelServer
) -> None:
    where = _project(tmp_path / "p")
    bad = [
        openai_completion(
            None,
            [
                openai_tool_call("c1", "run_agent", json.dumps({"agent": "other", "task": "x"})),
                openai_tool_call("c2", "run_agent", json.dumps({"agent": "hidden", "task": "x"})),
            ],
        ),
        openai_completion("Done without them."),
    ]
    server.push(*(Canned(body=b) for b in bad))
    result = flow(*_run_args(server), cwd=where, env=provider_env())
    assert result.returncode == 0, result.stderr
    assert len(server.requests) == 2  # nothing ran in between: no child made a model call
    results = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert [r["tool_call_id"] for r in results] == ["c1", "c2"]
    for r in results:
        assert "may not be run from here" in r["content"] and "helper" in r["content"]
    assert not (where / "run" / "progress.steps").exists()


def test_an_agent_without_agents_list_offers_every_callable_agent_but_hidden_ones(
    tmp_path: Path, server: ModelServer
) -> None:
    lead = LEAD.replace("agents: ['helper']\n", "")
    where = _project(tmp_path / "p", lead=lead)
    server.push(Canned(body=openai_completion("Nothing to hand out.")))
    assert flow(*_run_args(server), cwd=where, env=provider_env()).returncode == 0
    [spec] = server.requests[0].body["tools"]
    assert spec["function"]["parameters"]["properties"]["agent"]["enum"] == ["helper", "other"]


def test_a_progress_file_edited_to_name_another_agent_does_not_run_it(
    tmp_path: Path, server: ModelServer
) -> None:
    where = _project(tmp_path / "p")
    server.push(*_replies(delay_at=1)[:2])
    proc = spawn(*_run_args(server), cwd=where, env=provider_env())
    _stop_when(proc, server, 2)  # inside the child's first call
    progress = where / "run" / "progress.md"
    text = progress.read_text(encoding="utf-8")
    assert '"agent": "helper"' in text
    progress.write_text(text.replace('"agent": "helper"', '"agent": "other"'), encoding="utf-8")

    server.requests.clear()
    result = _resume(where, server)
    # The edited call is not this machine's record: nothing runs until a person decides.
    assert result.returncode != 0
    assert "run_agent" in result.stderr and server.requests == []
    # Trusting it as written still never runs `other`: it is not offered, and the call has a
    # child run of its own (the helper's), so the run stops for review and nothing is sent.
    result = _resume(where, server, "--trust-calls")
    assert result.returncode == 8, result.stderr
    assert "not offered here now" in result.stderr and server.requests == []
    assert not any(p.name == "other" for p in (where / "run").rglob("*"))


def test_a_resume_that_no_longer_finds_the_subagent_stops_for_review(
    tmp_path: Path, server: ModelServer
) -> None:
    where = _project(tmp_path / "p")
    server.push(*_replies(delay_at=1)[:2])
    proc = spawn(*_run_args(server), cwd=where, env=provider_env())
    _kill_when(proc, server, 2)  # inside the helper's first call
    server.requests.clear()
    # The helper's file is moved away: it is not found, and its child is not given up.
    helper = where / "agents" / "helper.agent.md"
    aside = helper.rename(where / "helper.agent.md.aside")
    result = _resume(where, server)
    assert result.returncode == 8, result.stderr
    assert "not offered here now" in result.stderr and "--agents" in result.stderr
    assert server.requests == []
    # With the file back, the child resumes and the run completes.
    aside.rename(helper)
    server.push(*_replies()[1:])
    result = _resume(where, server)
    assert result.returncode == 0, result.stderr
    assert len(server.requests) == 3


def test_a_child_that_ran_another_agent_file_is_not_resumed(
    tmp_path: Path, server: ModelServer
) -> None:
    where = _project(tmp_path / "p")
    server.push(*_replies(delay_at=1)[:2])
    proc = spawn(*_run_args(server), cwd=where, env=provider_env())
    _stop_when(proc, server, 2)
    child = where / CHILD_FILE
    text = child.read_text(encoding="utf-8")
    # The child's own file is edited to say it runs `other`'s file.
    old = next(line for line in text.splitlines() if "helper.agent.md" in line)
    child.write_text(text.replace(old, old.replace("helper.agent.md", "other.agent.md")))

    server.requests.clear()
    result = _resume(where, server)
    assert result.returncode != 0
    assert "other.agent.md" in result.stderr and "helper" in result.stderr
    assert server.requests == []


def test_a_resume_offers_the_agents_found_then_and_reports_a_changed_offer(
    tmp_path: Path, server: ModelServer
) -> None:
    lead = LEAD.replace("agents: ['helper']\n", "")
    where = _project(tmp_path / "p", lead=lead)
    server.push(Canned(body=openai_completion("slow"), delay=10))
    proc = spawn(*_run_args(server), cwd=where, env=provider_env())
    _stop_when(proc, server, 1)
    third = HELPER.replace("name: helper", "name: third")
    (where / "agents" / "third.agent.md").write_text(third, encoding="utf-8")

    server.requests.clear()
    server.push(Canned(body=openai_completion("Nothing to hand out.")))
    result = _resume(where, server)
    assert result.returncode == 0, result.stderr
    assert "the agents the subagent tool offers changed" in result.stderr
    assert "added third" in result.stderr
    [spec] = server.requests[0].body["tools"]
    enum = spec["function"]["parameters"]["properties"]["agent"]["enum"]
    assert enum == ["helper", "other", "third"]
    text = (where / "run" / "progress.md").read_text(encoding="utf-8")
    assert "added third" in text  # the attempt's note


# --- SIGKILL at named crash points, in the parent and inside the subagent ---------------------

#: The scripted provider answers a request with ``replies[k]``, k being the assistant messages
#: already in it, so parent and child (separate conversations) get the same sequence: the
#: parent's first reply calls the helper; the helper, which has no subagent tool, gets an error
#: result for the same call (a durable first turn), then both answer with the second reply.
SCRIPT = """\
replies:
  - tool_calls:
      - name: run_agent
        arguments: {agent: helper, task: Count the bees.}
    usage: {input_tokens: 10, output_tokens: 1}
  - content: "There are 3 bees."
    usage: {input_tokens: 20, output_tokens: 2}
"""

SCRIPTED_RUN = (
    "run",
    "agents/lead.agent.md",
    "--task",
    "How many bees?",
    "--agents",
    "agents",
    "--provider",
    "scripted",
    "--recording",
    "script.yaml",
    "--progress",
    "run/progress.md",
    "--new",
)
#: Where the scripted run's child goes (the script gives the first reply's call ``call_0_0``).
SCRIPTED_CHILD = Path("run") / "progress.steps" / "task" / "agents" / "call_0_0" / "progress.md"

#: The points a run of these agents passes; the two ``subagent`` points are the call's own.
POINTS = (
    "engine.subagent_started",
    "engine.subagent_returned",
    "engine.before_tool_start_record",
    "engine.tool_start_recorded",
    "engine.tool_ran",
    "engine.tool_result_recorded",
    "engine.model_replied",
    "store.journal_after_fsync",
    "store.checkpoint_after_rename",
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
    return transcript(where / "run" / "progress.md"), transcript(where / SCRIPTED_CHILD)


@pytest.mark.parametrize(
    "point", sweep(POINTS, keep={"engine.subagent_started", "engine.subagent_returned"})
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
            result = flow("resume", "run/progress.md", "--agents", "agents", cwd=where)
        if result.returncode == 0:
            break
    assert result.returncode == 0, result.stderr
    assert (transcript(progress), transcript(where / SCRIPTED_CHILD)) == scripted_reference
    parent = _status(where)
    # Four replies (two of the parent's, two of the child's), each counted once however often
    # the run was resumed.
    assert parent["usage"]["turns"] == 4 and parent["usage"]["input_tokens"] == 60
    assert parent["usage_total"] == parent["usage"]


def test_a_rewound_step_sets_the_earlier_subagent_run_aside_and_runs_a_new_one(
    tmp_path: Path,
) -> None:
    where = _scripted_project(tmp_path / "p")
    assert flow(*SCRIPTED_RUN, cwd=where).returncode == 0
    first = (where / SCRIPTED_CHILD).read_text(encoding="utf-8")
    rewound = flow("rewind", "run/progress.md", "--to", "task", cwd=where)
    assert rewound.returncode == 0, rewound.stderr
    # The same script gives the same call id again: a new child, the old one kept aside.
    result = flow("resume", "run/progress.md", "--agents", "agents", cwd=where)
    assert result.returncode == 0, result.stderr
    aside = SCRIPTED_CHILD.parent.parent / "call_0_0.archive-1" / "progress.md"
    assert (where / aside).read_text(encoding="utf-8") == first
    again = (where / SCRIPTED_CHILD).read_text(encoding="utf-8")
    assert again != first and "status: completed" in again
    data = _status(where)
    assert data["status"] == "completed"
    [child] = data["children"]
    assert child["status"] == "completed" and child["usage"]["turns"] == 2


@pytest.mark.parametrize(
    ("link", "words"),
    [
        ("progress.md", "a child run cannot contain its parent"),
        ("../elsewhere/progress.md", "leaves the folder of the file that names it"),
    ],
)
def test_a_subagent_link_that_leads_back_or_out_is_refused(
    tmp_path: Path, link: str, words: str
) -> None:
    where = _scripted_project(tmp_path / "p")
    killed = flow(*SCRIPTED_RUN, cwd=where, env=flow_env(FLOW_CRASH_AT="engine.subagent_started"))
    assert killed.returncode == -9, killed.stderr
    progress = where / "run" / "progress.md"
    before = progress.read_text(encoding="utf-8")
    # Killed before a fold, the link may be in the journal beside the file: rewrite it in
    # whichever of them holds it, as someone handing over a doctored run could.
    journal = [p for p in progress.parent.iterdir() if p.name != "progress.md" and p.is_file()]
    where_link = SCRIPTED_CHILD.relative_to("run").as_posix()
    edited = False
    for path in [progress, *journal]:
        text = path.read_text(encoding="utf-8")
        if where_link in text:
            path.write_text(text.replace(where_link, link), encoding="utf-8")
            edited = True
    assert edited, before
    result = flow("resume", "run/progress.md", "--agents", "agents", cwd=where)
    assert result.returncode != 0
    assert words in result.stderr, result.stderr
    assert not (where / "run" / "progress.steps" / "task" / "agents").exists() or not any(
        (where / "run" / "progress.steps" / "task" / "agents").rglob("progress.md")
    )


def test_flow_list_shows_a_subagent_run_under_its_parent_not_as_a_run_of_its_own(
    tmp_path: Path,
) -> None:
    where = _scripted_project(tmp_path / "p")
    run = tuple(a for a in SCRIPTED_RUN if a not in ("--progress", "run/progress.md"))
    assert flow(*run, cwd=where).returncode == 0
    listed = json.loads(flow("list", "--all", "--json", cwd=where).stdout)
    runs = listed["runs"] if isinstance(listed, dict) else listed
    [parent] = runs
    [child] = parent["children"]
    assert (child["agent"], child["call"], child["status"]) == ("helper", "call_0_0", "completed")
    text = flow("list", "--all", cwd=where, env={**flow_env(), "COLUMNS": "200"}).stdout
    assert "task › agent helper" in text


def test_a_subagent_gets_what_is_left_of_the_budget_and_a_partial_roll_up_counts_once(
    tmp_path: Path,
) -> None:
    where = _scripted_project(tmp_path / "p")
    # Two turns in all: the parent's first, then one left for the helper, which needs two.
    first = flow(*SCRIPTED_RUN, "--max-turns", "2", cwd=where)
    assert first.returncode != 0
    data = _status(where)
    assert data["status"] == "budget_exhausted"
    assert data["reason"].startswith("in the subagent helper called in step 'task'")
    [child] = data["children"]
    assert child["status"] == "budget_exhausted" and child["usage"]["turns"] == 1
    # The helper's turn is rolled up already (it stopped): the parent counts both.
    assert data["usage"]["turns"] == 2 and data["usage_total"] == data["usage"]

    result = flow("resume", "run/progress.md", "--agents", "agents", "--max-turns", "4", cwd=where)
    assert result.returncode == 0, result.stderr
    data = _status(where)
    assert data["status"] == "completed"
    # Rolled up again when the helper completed: only what was new, so each reply once.
    assert data["usage"]["turns"] == 4 and data["usage"]["input_tokens"] == 60
    assert data["usage_total"] == data["usage"]


def test_agents_side_by_side_find_each_other_without_agents_folders(
    tmp_path: Path, server: ModelServer
) -> None:
    where = _project(tmp_path / "p")
    server.push(*_replies())
    args = [a for a in _run_args(server) if a not in ("--agents", "agents")]
    result = flow(*args, cwd=where, env=provider_env())
    assert result.returncode == 0, result.stderr
    assert (where / CHILD_FILE).is_file()  # the helper, found beside the lead, ran
