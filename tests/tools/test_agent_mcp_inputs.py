"""An agent's ``mcp-servers:`` as the public Copilot agents write them: ``${input:ID}`` with no
``inputs`` list (VS Code asks for the value: flow takes ``--mcp-input``, the environment or the
terminal, and records nothing of it), GitHub's ``${{ secrets.NAME }}`` (reported, never sent
as written), and ``flow check``/``flow agents`` reporting every broken entry of every agent
(issue 43, items 3 and 4)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from promptflow_resume.base.errors import InputError
from promptflow_resume.check import check_workflows, checked_agents
from promptflow_resume.tools.mcp_config import agent_config
from promptflow_resume.tools.mcp_records import McpConfigError
from tests import support
from tests.support.flowproc import flow
from tests.support.trust import trusted

SERVER = support.SUPPORT / "mcp_servers.py"
#: The header of the public collection's CAST Imaging agents (github/awesome-copilot, MIT).
CAST = """---
name: cast-imaging-impact-analysis-agent
description: Change impact assessment using CAST Imaging
tools: ["*"]
mcp-servers:
  imaging-impact-analysis:
    type: 'http'
    url: 'https://castimaging.io/imaging/mcp/'
    headers:
      'x-api-key': '${input:imaging-key}'
    args: []
    tools: ["*"]
---
# Impact Analysis Agent
"""
LEAKY = """---
name: keeper
description: Keeps the notes
provider: scripted
mcp-servers:
  notes:
    type: local
    command: {python}
    args: [{server}, "${{workspaceFolder}}/state"]
    env:
      NOTES_TOKEN: "${{input:notes-token}}"
    tools: ["leak"]
---
You keep the notes.
"""
GITHUB = """---
name: docs-researcher
description: Reads documentation through a remote MCP server.
mcp-servers:
  context7:
    type: http
    url: https://mcp.context7.com/mcp
    headers:
      CONTEXT7_API_KEY: ${{ secrets.COPILOT_MCP_CONTEXT7_API_KEY }}
    tools: ["*"]
---
Body.
"""


def test_an_agents_input_needs_no_inputs_list(tmp_path: Path) -> None:
    agent = tmp_path / "cast.agent.md"
    servers = {"imaging": {"type": "http", "url": "https://x.test/mcp"}}
    servers["imaging"]["headers"] = {"x-api-key": "${input:imaging-key}"}  # type: ignore[index]
    asked: list[tuple[str, bool]] = []

    def ask(input_id: str, description: str, password: bool) -> str:
        asked.append((input_id, password))
        return "typed-on-the-terminal"

    checked = agent_config(agent, servers, workspace=tmp_path, resolve_inputs=False)
    assert checked.servers["imaging"].headers == {"x-api-key": "${input:imaging-key}"}
    config = agent_config(agent, servers, workspace=tmp_path, ask=ask)
    assert config.servers["imaging"].headers == {"x-api-key": "typed-on-the-terminal"}
    assert asked == [("imaging-key", True)]  # a secret: asked with the typing hidden
    assert "typed-on-the-terminal" in config.secrets
    given = agent_config(agent, servers, workspace=tmp_path, ask=ask, given={"imaging-key": "g"})
    assert given.servers["imaging"].headers == {"x-api-key": "g"} and len(asked) == 1
    with pytest.raises(InputError) as no_terminal:
        agent_config(agent, servers, workspace=tmp_path, env={})
    assert "--mcp-input imaging-key=VALUE" in str(no_terminal.value.hint)


def test_a_github_secret_expression_is_refused_not_sent(tmp_path: Path) -> None:
    servers = {
        "docs": {
            "type": "http",
            "url": "https://mcp.example.test/mcp",
            "headers": {"KEY": "${{ secrets.COPILOT_MCP_DOCS_KEY }}"},
        }
    }
    with pytest.raises(McpConfigError) as refused:
        agent_config(tmp_path / "a.agent.md", servers, workspace=tmp_path)
    assert "is a GitHub Actions expression" in refused.value.message
    assert "${env:COPILOT_MCP_DOCS_KEY}" in str(refused.value.hint)
    assert refused.value.field == "$.servers.docs.headers.KEY"
    # GitHub's `$NAME` for a variable of the copilot environment: flow's environment's.
    bearer = {"type": "http", "url": "https://x.test/mcp", "headers": {"A": "Bearer $DT_TOKEN"}}
    env = {"DT_TOKEN": "dt0c01.secret-token-value"}
    config = agent_config(tmp_path / "a.agent.md", {"dt": bearer}, workspace=tmp_path, env=env)
    assert config.servers["dt"].headers == {"A": "Bearer dt0c01.secret-token-value"}
    with pytest.raises(InputError, match="DT_TOKEN is not set"):
        agent_config(tmp_path / "a.agent.md", {"dt": bearer}, workspace=tmp_path, env={})
    # What GitHub fills in that has a meaning here: the checkout is the workspace.
    docker = {"type": "local", "command": "docker", "args": ["-v", "${{ github.workspace }}:/w"]}
    config = agent_config(tmp_path / "a.agent.md", {"arm": docker}, workspace=tmp_path)
    assert config.servers["arm"].args == ("-v", f"{tmp_path}:/w")


def test_flow_check_of_a_folder_reports_every_agent_and_every_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "cast.agent.md").write_text(CAST, encoding="utf-8")
    (folder / "docs.agent.md").write_text(GITHUB, encoding="utf-8")
    two = "---\nname: two\nmcp-servers:\n  a:\n    type: weird\n  b:\n    type: stdio\n---\nB.\n"
    (folder / "two.agent.md").write_text(two, encoding="utf-8")
    (folder / "zz-plain.agent.md").write_text("---\nname: plain\n---\nBody.\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    report = check_workflows([folder])
    by_file = {Path(p["path"]).name: p for p in report.plans}
    # Every file is reported, the first broken one does not end the check.
    assert sorted(by_file) == [
        "cast.agent.md",
        "docs.agent.md",
        "two.agent.md",
        "zz-plain.agent.md",
    ]
    assert report.exit_code == 4
    assert by_file["cast.agent.md"]["ok"] and by_file["zz-plain.agent.md"]["ok"]
    (secret,) = by_file["docs.agent.md"]["diagnostics"]
    assert (secret["line"], secret["field"], secret["code"]) == (
        9,
        "$.mcp-servers.context7.headers.CONTEXT7_API_KEY",
        "mcp-config",
    )
    assert "not support it outside GitHub" in secret["message"]
    fields = [d["field"] for d in by_file["two.agent.md"]["diagnostics"]]
    assert fields == ["$.mcp-servers.a.type", "$.mcp-servers.b.command"]
    # flow agents counts the same errors as flow check.
    listed = {a.path.name: len(a.errors) for a in checked_agents(tmp_path, (folder,))}
    assert listed == {name: plan["errors"] for name, plan in by_file.items()}


def test_a_run_takes_the_input_from_the_command_line_and_records_nothing_of_it(
    tmp_path: Path,
) -> None:
    where = tmp_path / "ws"
    agents = where / ".github" / "agents"
    agents.mkdir(parents=True)
    text = LEAKY.format(python=json.dumps(sys.executable), server=json.dumps(str(SERVER)))
    (agents / "keeper.agent.md").write_text(text, encoding="utf-8")
    script = {"replies": [{"content": "", "tool_calls": [{"name": "leak", "arguments": {}}]}, "ok"]}
    (where / "s.yaml").write_text(json.dumps(script), encoding="utf-8")
    trusted(where)
    args = ("run", ".github/agents/keeper.agent.md", "--task", "t", "--recording", "s.yaml")
    args += ("--progress", "run/progress.md", "--new")
    refused = flow(*args, cwd=where)
    assert refused.returncode == 9, refused.stderr
    assert "needs the input `notes-token`" in refused.stderr
    assert "--mcp-input notes-token=VALUE" in refused.stderr
    secret = "tok-3f9a61c2e8d74b05"
    done = flow(*args, "--mcp-input", f"notes-token={secret}", cwd=where)
    assert done.returncode == 0, done.stderr
    progress = (where / "run" / "progress.md").read_text(encoding="utf-8")
    # The server had the value (its answer named it) and nothing written keeps it.
    assert "the token is [REDACTED" in progress
    for path in (where / "run").rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(encoding="utf-8", errors="replace"), path
