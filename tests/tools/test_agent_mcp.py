"""An agent's own ``mcp-servers:``: merged into the run's MCP configuration (the agent's server
winning over the workspace's of the same name), against the real SDK server in
``tests/support/mcp_servers.py``; a prompt file's ``agent: NAME`` brings them along."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from promptflow_resume.progress import load_progress
from promptflow_resume.workflow import load_workflow
from tests import support
from tests.support.flowproc import flow
from tests.support.trust import trusted

SERVER = support.SUPPORT / "mcp_servers.py"

AGENT = """---
name: scribe
description: Keeps the notes
provider: scripted
mcp-servers:
  notes:
    type: local
    command: {python}
    args: [{server}, "${{workspaceFolder}}/agent-state"]
    tools: ["append_note", "read_notes"]
---
You keep the team's notes.
"""


def workspace(tmp_path: Path, *, clash: bool = False) -> Path:
    """An agent defining the notes server, a scripted model that appends a note, and with
    ``clash`` a workspace configuration whose own `notes` server writes elsewhere."""
    where = tmp_path / "ws"
    agents = where / ".github" / "agents"
    agents.mkdir(parents=True)
    text = AGENT.format(python=json.dumps(sys.executable), server=json.dumps(str(SERVER)))
    (agents / "scribe.agent.md").write_text(text, encoding="utf-8")
    script = {
        "replies": [
            {
                "content": "Noting.",
                "tool_calls": [{"name": "append_note", "arguments": {"text": "ship"}}],
            },
            "Noted.",
        ]
    }
    (where / "notes.script.yaml").write_text(json.dumps(script), encoding="utf-8")
    if clash:
        (where / ".vscode").mkdir()
        config = {
            "servers": {
                "notes": {"command": sys.executable, "args": [str(SERVER), "workspace-state"]}
            }
        }
        (where / ".vscode" / "mcp.json").write_text(json.dumps(config), encoding="utf-8")
    return trusted(where)


def run(where: Path, target: str, *extra: str) -> tuple[int, str]:
    result = flow(
        "run",
        target,
        *extra,
        "--recording",
        "notes.script.yaml",
        "--progress",
        "run/progress.md",
        "--new",
        cwd=where,
    )
    assert "Traceback" not in result.stderr
    return result.returncode, result.stderr


def notes(where: Path, state: str) -> str:
    path = where / state / "notes.txt"
    return path.read_text(encoding="utf-8") if path.exists() else ""


def test_the_agents_server_tools_are_named_by_its_tools_list(tmp_path: Path) -> None:
    where = workspace(tmp_path)
    wf = load_workflow(where / ".github/agents/scribe.agent.md")
    assert list(wf.mcp_servers) == ["notes"]
    assert {"notes/append_note", "notes/read_notes"} <= set(wf.tool_map)


def test_an_agent_runs_with_the_server_it_defines(tmp_path: Path) -> None:
    where = workspace(tmp_path)
    code, stderr = run(where, ".github/agents/scribe.agent.md", "--task", "Note: ship.")
    assert code == 0, stderr
    assert "ship" in notes(where, "agent-state")
    loaded, _ = load_progress(where / "run" / "progress.md")
    results = [e.content for e in loaded.transcript if e.role == "tool_result"]
    assert len(results) == 1


def test_the_agents_server_wins_over_the_workspaces(tmp_path: Path) -> None:
    where = workspace(tmp_path, clash=True)
    code, stderr = run(where, ".github/agents/scribe.agent.md", "--task", "Note: ship.")
    assert code == 0, stderr
    assert "ship" in notes(where, "agent-state")
    assert not (where / "workspace-state").exists()
    assert "the MCP server `notes` is defined by the agent" in stderr
    assert "the agent's is used" in stderr


def test_a_prompt_file_using_the_agent_gets_its_servers(tmp_path: Path) -> None:
    where = workspace(tmp_path)
    (where / "note.prompt.md").write_text(
        "---\nagent: scribe\n---\nWrite the note `ship`.\n", encoding="utf-8"
    )
    code, stderr = run(where, "note.prompt.md")
    assert code == 0, stderr
    assert "ship" in notes(where, "agent-state")
