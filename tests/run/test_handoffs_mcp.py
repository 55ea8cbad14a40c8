"""A later part of a handoff chain gets the MCP tools its own agent names (docs/spec.md 4.13).

Two agents: the writer names no MCP tool; the reviewer it hands off to names ``notes/*``,
served by the real SDK server of ``tests/support/mcp_servers.py`` — configured in the
workspace's ``.vscode/mcp.json``, or in the reviewer's own ``mcp-servers:``. Real ``flow``
processes against the local OpenAI-protocol server, which records the tools each request
offers; one run is killed with SIGKILL while the reviewer's read-only call is held by the
server, and resumed.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.flowproc import flow, provider_env, spawn, transcript
from tests.support.providers_server import (
    Canned,
    ModelServer,
    openai_completion,
    openai_tool_call,
)
from tests.support.trust import trusted

SERVER = Path(__file__).resolve().parents[1] / "support" / "mcp_servers.py"

WRITER = """\
---
name: writer
model: gpt-4o
tools: [think]
handoffs:
  - label: Review
    agent: reviewer
    prompt: Review the draft against the notes.
---
You write drafts.
"""

REVIEWER = """\
---
name: reviewer
tools: ['notes/*']
---
You review drafts against the team's notes.
"""

#: The reviewer defines the server itself and lists no tools: it is offered all of them.
REVIEWER_OWN = f"""\
---
name: reviewer
mcp-servers:
  notes:
    type: local
    command: {json.dumps(sys.executable)}
    args: [{json.dumps(str(SERVER))}, state]
---
You review drafts against the team's notes.
"""


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv


def _project(where: Path, reviewer: str, *, workspace_config: bool) -> Path:
    (where / "agents").mkdir(parents=True)
    (where / "state").mkdir()
    (where / "agents" / "writer.agent.md").write_text(WRITER, encoding="utf-8")
    (where / "agents" / "reviewer.agent.md").write_text(reviewer, encoding="utf-8")
    if workspace_config:
        (where / ".vscode").mkdir()
        config = {
            "servers": {
                "notes": {
                    "command": sys.executable,
                    "args": [str(SERVER), "${workspaceFolder}/state"],
                }
            }
        }
        (where / ".vscode" / "mcp.json").write_text(json.dumps(config), encoding="utf-8")
        trusted(where)
    return where


def _run_args(server: ModelServer) -> tuple[str, ...]:
    return (
        "run",
        "agents/writer.agent.md",
        "--task",
        "Draft the release note.",
        "--handoff",
        "Review",
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


def _replies(tool: str) -> list[Canned]:
    return [
        Canned(body=openai_completion("Draft: v2 is out.")),
        Canned(body=openai_completion(None, [openai_tool_call("call_r1", tool, "{}")])),
        Canned(body=openai_completion("Reviewed: matches the notes.")),
    ]


def _tools(body: dict[str, object]) -> list[str]:
    tools = body.get("tools") or []
    assert isinstance(tools, list)
    return [t["function"]["name"] for t in tools]


def _calls(where: Path) -> list[str]:
    log = where / "state" / "calls.log"
    return [line.split()[0] for line in log.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("own", [False, True], ids=["workspace-config", "agent-mcp-servers"])
def test_only_the_part_whose_agent_names_the_server_is_offered_its_tools(
    tmp_path: Path, server: ModelServer, own: bool
) -> None:
    where = _project(tmp_path / "p", REVIEWER_OWN if own else REVIEWER, workspace_config=not own)
    server.push(*_replies("stats"))
    result = flow(*_run_args(server), cwd=where, env=provider_env())
    assert result.returncode == 0, result.stderr

    writer, reviewer, last = (r.body for r in server.requests)
    assert _tools(writer) == ["think"]  # the writer names no MCP tool
    offered = _tools(reviewer)
    assert {"read_notes", "append_note", "stats"} <= set(offered)
    assert _tools(last) == offered
    assert _calls(where) == ["stats"]  # the call ran on the real server, once
    results = [m for m in last["messages"] if m["role"] == "tool"]
    assert [r["tool_call_id"] for r in results] == ["call_r1"]
    assert "error" not in results[0]["content"].lower()[:20]
    assert (where / "run" / "mcp-notes.stderr.log").exists()
    text = (where / "run" / "progress.md").read_text(encoding="utf-8")
    assert "mcp tools: notes=sha256:" in text  # the attempt records the server's tool list


def test_a_part_killed_in_its_mcp_call_resumes_it_durably(
    tmp_path: Path, server: ModelServer
) -> None:
    where = _project(tmp_path / "p", REVIEWER, workspace_config=True)
    state = where / "state"
    (state / "hold").write_text("", encoding="utf-8")
    server.push(*_replies("read_notes")[:2])
    proc = spawn(*_run_args(server), cwd=where, env=provider_env())
    deadline = time.monotonic() + 60
    while not (state / "holding").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the reviewer's call never reached the server"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    (state / "hold").unlink()
    assert _calls(where) == ["read_notes"]

    server.requests.clear()
    server.push(_replies("read_notes")[2])
    result = flow(
        "resume", "run/progress.md", "--base-url", server.url + "/v1", cwd=where, env=provider_env()
    )
    assert result.returncode == 0, result.stderr
    # The read-only call in flight ran again on the reviewer's server; nothing else was sent
    # but the reviewer's last request, which still offers the server's tools.
    assert _calls(where) == ["read_notes", "read_notes"]
    assert len(server.requests) == 1
    assert "read_notes" in _tools(server.requests[0].body)
    roles = [e[0] for e in transcript(where / "run" / "progress.md") if e[0] != "note"]
    assert roles[-3:] == ["tool_call", "tool_result", "assistant"]


def test_two_agents_defining_one_server_differently_are_refused(
    tmp_path: Path, server: ModelServer
) -> None:
    where = _project(tmp_path / "p", REVIEWER_OWN, workspace_config=False)
    writer = WRITER.replace("tools: [think]\n", "tools: [think]\nmcp-servers:\n")
    writer = writer.replace("mcp-servers:\n", "mcp-servers:\n  notes:\n    command: other\n")
    (where / "agents" / "writer.agent.md").write_text(writer, encoding="utf-8")
    result = flow(*_run_args(server), cwd=where, env=provider_env())
    assert result.returncode == 4, result.stderr
    assert "define the MCP server `notes` differently" in result.stderr
    assert "reviewer.agent.md" in result.stderr and "$.mcp-servers.notes" in result.stderr
    assert server.requests == [] and not (where / "run").exists()


def test_a_part_naming_a_server_nothing_configures_is_told_at_the_start(
    tmp_path: Path, server: ModelServer
) -> None:
    where = _project(tmp_path / "p", REVIEWER, workspace_config=False)
    server.push(_replies("stats")[0], _replies("stats")[2])
    result = flow(*_run_args(server), cwd=where, env=provider_env())
    assert result.returncode == 0, result.stderr
    assert "`notes/*`, which no built-in, command or MCP server provides" in result.stderr
    assert "stats" not in _tools(server.requests[1].body)
