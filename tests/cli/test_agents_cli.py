"""``flow run AGENT --task``: the agent's body is the system message and the task the user
message, against a local OpenAI-protocol server; the task from text, ``@FILE`` or stdin, asked
on a terminal, refused without one; an agent run killed mid-step resumes without asking again.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from promptflow_resume.base.errors import EXIT_INPUT
from promptflow_resume.progress import load_progress
from tests.support.flowproc import FLOW, flow, flow_env
from tests.support.providers_server import (
    Canned,
    ModelServer,
    Received,
    openai_completion,
    openai_stream,
    openai_tool_call,
)

AGENT = """---
name: reviewer
description: Reviews a change
argument-hint: the change to review
tools: [note]
commands:
  note:
    description: Write a note
    argv: ["echo", "noted"]
    idempotent: true
---
You are a careful reviewer. Answer in one line.
"""
TASK = "Review the login change."


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv


@pytest.fixture
def where(tmp_path: Path) -> Path:
    path = tmp_path / ".github" / "agents" / "reviewer.agent.md"
    path.parent.mkdir(parents=True)
    path.write_text(AGENT, encoding="utf-8")
    return tmp_path


def env(server: ModelServer, **extra: str) -> dict[str, str]:
    return flow_env(OPENAI_API_KEY="test-key", OPENAI_BASE_URL=server.url + "/v1", **extra)


def provider_args(server: ModelServer) -> tuple[str, ...]:
    return ("--provider", "openai", "--model", "local-model", "--base-url", server.url + "/v1")


def messages(server: ModelServer, n: int = 0) -> list[dict[str, Any]]:
    body = server.requests[n].body
    assert isinstance(body, dict)
    found: list[dict[str, Any]] = body["messages"]
    return found


def replies(server: ModelServer, *turns: str | tuple[str, str]) -> None:
    """Answer each request with the next turn: a text, or (call id, tool name) for a tool call;
    streamed when the request asks for a stream (flow streams on a terminal)."""
    queue = list(turns)

    def respond(received: Received) -> Canned:
        turn = queue.pop(0)
        streamed = isinstance(received.body, dict) and received.body.get("stream")
        if isinstance(turn, tuple):
            call_id, name = turn
            if streamed:
                return Canned(events=openai_stream(tool_calls=[(call_id, name, ["{}"])]))
            return Canned(body=openai_completion("", [openai_tool_call(call_id, name, "{}")]))
        return (
            Canned(events=openai_stream([turn]))
            if streamed
            else Canned(body=openai_completion(turn))
        )

    server.responder = respond


def run_args(server: ModelServer, *args: str) -> list[str]:
    """``flow run`` of the agent against the local server, into ``run/progress.md``."""
    return [
        *FLOW,
        "run",
        ".github/agents/reviewer.agent.md",
        *provider_args(server),
        "--new",
        "--progress",
        "run/progress.md",
        *args,
    ]


def run_agent(where: Path, server: ModelServer, *args: str, stdin: str | None = None) -> Any:
    return subprocess.run(
        run_args(server, *args),
        cwd=where,
        env=env(server),
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def check_sent(server: ModelServer, where: Path, task: str) -> None:
    sent = messages(server)
    assert sent[0]["role"] == "system"
    assert "You are a careful reviewer. Answer in one line." in sent[0]["content"]
    assert sent[-1] == {"role": "user", "content": task}
    run = load_progress(where / "run" / "progress.md")[0]
    assert run.status == "completed"
    assert run.inputs["task"] == task
    users = [e.content for e in run.transcript if e.role == "user"]
    assert users == [task]
    # The progress file's first entry is the system text: the agent's instructions.
    first = run.transcript[0]
    assert first.role == "system"
    assert first.content.startswith("You are a careful reviewer. Answer in one line.")


def test_task_text_is_the_user_message(where: Path, server: ModelServer) -> None:
    replies(server, "Looks fine.")
    result = run_agent(where, server, "--task", TASK)
    assert result.returncode == 0, result.stderr
    check_sent(server, where, TASK)


def test_task_from_a_file(where: Path, server: ModelServer) -> None:
    (where / "task.txt").write_text(TASK, encoding="utf-8")
    replies(server, "Looks fine.")
    result = run_agent(where, server, "--task", "@task.txt")
    assert result.returncode == 0, result.stderr
    check_sent(server, where, TASK)


def test_task_from_stdin(where: Path, server: ModelServer) -> None:
    replies(server, "Looks fine.")
    result = run_agent(where, server, "--task", "-", stdin=TASK)
    assert result.returncode == 0, result.stderr
    check_sent(server, where, TASK)


def test_an_unreadable_task_file_is_an_input_error(where: Path, server: ModelServer) -> None:
    result = run_agent(where, server, "--task", "@missing.txt")
    assert result.returncode == EXIT_INPUT
    assert "--task @missing.txt: cannot read missing.txt" in result.stderr
    assert "Traceback" not in result.stderr
    assert server.requests == []


def test_without_a_task_or_terminal_it_refuses(where: Path, server: ModelServer) -> None:
    result = run_agent(where, server)
    assert result.returncode == EXIT_INPUT == 9
    assert "is a custom agent: it needs a task, and there is no terminal to ask for one" in (
        result.stderr
    )
    assert "It asks for: the change to review." in result.stderr
    assert "--task TEXT, --task @FILE" in result.stderr
    assert "Traceback" not in result.stderr
    assert server.requests == [] and not (where / "run").exists()


def test_a_terminal_asks_for_the_task_with_the_hint(where: Path, server: ModelServer) -> None:
    replies(server, "Looks fine.")
    argv = ["-m", "promptflow_resume", "run", ".github/agents/reviewer.agent.md"]
    argv += [*provider_args(server), "--new", "--progress", "run/progress.md"]
    child = pexpect.spawn(
        sys.executable, argv, cwd=str(where), env=env(server), encoding="utf-8", timeout=60
    )
    try:
        child.expect(r"task \(the change to review\)")
        child.sendline(TASK)
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before
    check_sent(server, where, TASK)


def test_task_on_a_prompt_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "hello.prompt.md").write_text("Say hello.\n", encoding="utf-8")
    result = flow("run", "hello.prompt.md", "--provider", "echo", "--task", "x", cwd=tmp_path)
    assert result.returncode == EXIT_INPUT
    assert "--task gives an agent its task, and hello.prompt.md is a prompt file" in result.stderr
    assert "--input NAME=VALUE" in result.stderr


def test_task_on_a_prompt_file_with_a_task_input(tmp_path: Path) -> None:
    (tmp_path / "do.prompt.md").write_text(
        "---\ninputs:\n  task: {type: string}\n---\nDo this: ${input:task}\n", encoding="utf-8"
    )
    result = flow("run", "do.prompt.md", "--provider", "echo", "--task", "sweep", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "\nDo this: sweep\n" in result.stderr


def test_task_and_input_task_together_are_refused(where: Path, server: ModelServer) -> None:
    result = run_agent(where, server, "--task", TASK, "--input", "task=other")
    assert result.returncode == EXIT_INPUT
    assert "--task and --input task=... both give the task; give one." in result.stderr


def test_resume_after_sigkill_continues_without_asking(where: Path, server: ModelServer) -> None:
    replies(server, ("c1", "note"), "Reviewed: fine.")
    killed = subprocess.run(
        run_args(server, "--task", TASK),
        cwd=where,
        env=env(server, FLOW_CRASH_AT="engine.tool_result_recorded"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert killed.returncode == -9, killed.stderr
    assert len(server.requests) == 1
    # On a terminal: a resume that asked for the task again would wait here for an answer.
    argv = ["-m", "promptflow_resume", "resume", "run/progress.md", *provider_args(server)]
    child = pexpect.spawn(
        sys.executable, argv, cwd=str(where), env=env(server), encoding="utf-8", timeout=60
    )
    try:
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before
    assert "task (" not in (child.before or "")
    run = load_progress(where / "run" / "progress.md")[0]
    assert run.status == "completed"
    assert [e.content for e in run.transcript if e.role == "user"] == [TASK]
    resumed = messages(server, 1)
    assert resumed[0]["role"] == "system" and "careful reviewer" in resumed[0]["content"]
    assert {"role": "user", "content": TASK} in resumed
    assert any(m["role"] == "tool" and "noted" in m["content"] for m in resumed)
    assert json.dumps(resumed).count(TASK) == 1


def test_a_prompt_file_runs_with_its_agent(tmp_path: Path, server: ModelServer) -> None:
    agents = tmp_path / "my-agents"
    agents.mkdir()
    (agents / "terse.agent.md").write_text(
        "---\ndescription: Terse\nmodel: GPT-4.1\ntools: ['read', 'todo']\n---\nBe terse.\n",
        encoding="utf-8",
    )
    (tmp_path / "ask.prompt.md").write_text(
        "---\nagent: terse\n---\nThe project is small.\n\n## Step 1: Ask\nWhat is it?\n",
        encoding="utf-8",
    )
    replies(server, "Small.")
    result = subprocess.run(
        [
            *FLOW,
            "run",
            "ask.prompt.md",
            "--agents",
            str(agents),
            "--new",
            "--base-url",
            server.url + "/v1",
            "--progress",
            "run/progress.md",
        ],
        cwd=tmp_path,
        env=env(server),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    body = server.requests[0].body
    assert body["model"] == "gpt-4.1"
    assert {t["function"]["name"] for t in body["tools"]} == {"read_file", "manage_todo_list"}
    system = body["messages"][0]
    assert system["role"] == "system"
    assert system["content"].index("Be terse.") < system["content"].index("The project is small.")
    assert body["messages"][-1]["content"].endswith("What is it?")
    # Without --agents the name is unknown: a positioned error, and nothing is sent.
    again = flow("run", "ask.prompt.md", "--new", cwd=tmp_path, env=env(server))
    assert again.returncode == 4
    assert "ask.prompt.md:2:8: $.agent: no custom agent is called `terse`" in again.stderr
    assert len(server.requests) == 1
    # status and compact find the agent where the run found it, with the same --agents.
    status = flow("status", "run/progress.md", "--agents", str(agents), "--json", cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["workflow_changed"] is False
    lost = flow("status", "run/progress.md", "--json", cwd=tmp_path)
    assert "no custom agent is called `terse`" in lost.stdout + lost.stderr
    compact = flow("compact", "run/progress.md", "--agents", str(agents), "--json", cwd=tmp_path)
    assert compact.returncode == 0, compact.stderr
    assert json.loads(compact.stdout)["compacted"] is False
