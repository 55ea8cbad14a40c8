"""MCP configurations as VS Code users write them: SSE servers, entries a run does not use
(broken ones included), the repository-root ``.mcp.json`` beside ``.vscode/mcp.json``, the
environment a stdio server gets, and tools that run only as MCP tasks.

Real servers only: ``tests/support/mcp_results_server.py`` (the ``mcp`` SDK) over stdio and SSE, and
real ``flow`` subprocesses for what a user sees.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from promptflow_resume.base.errors import EXIT_INVALID_FILE
from promptflow_resume.tools.mcp import McpServers
from promptflow_resume.tools.mcp_config import find_configs, load_configs
from promptflow_resume.tools.mcp_records import McpConfigError
from promptflow_resume.tools.tool import ToolContext
from tests import support
from tests.support.flowproc import flow, flow_env
from tests.support.trust import trusted

SERVER = support.SUPPORT / "mcp_results_server.py"
STDIO = {"command": sys.executable, "args": [str(SERVER)]}


def _workflow(tools: str) -> str:
    return f"""---
description: Use the results server
provider: scripted
tools: {tools}
---
## Step 1: Ask
Ask the server.
"""


def _workspace(
    tmp_path: Path,
    servers: dict[str, Any],
    *,
    tools: str = "['results/*']",
    call: tuple[str, dict[str, Any]] = ("big_text", {"size": 10}),
    root: dict[str, Any] | None = None,
) -> Path:
    """A workspace with ``servers`` in ``.vscode/mcp.json`` (and ``root`` in ``.mcp.json``),
    a workflow offering ``tools`` and a scripted model that makes ``call`` once."""
    where = tmp_path / "ws"
    where.mkdir()
    if servers:
        (where / ".vscode").mkdir()
        (where / ".vscode" / "mcp.json").write_text(
            json.dumps({"servers": servers}, indent=2), encoding="utf-8"
        )
        trusted(where)
    if root is not None:
        (where / ".mcp.json").write_text(json.dumps({"servers": root}, indent=2), encoding="utf-8")
        trusted(where)
    (where / "ask.prompt.md").write_text(_workflow(tools), encoding="utf-8")
    script = {
        "replies": [
            {"content": "Asking.", "tool_calls": [{"name": call[0], "arguments": call[1]}]},
            "Done.",
        ]
    }
    (where / "ask.script.yaml").write_text(json.dumps(script), encoding="utf-8")
    return where


def _run(where: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return flow(
        "run",
        "ask.prompt.md",
        "--recording",
        "ask.script.yaml",
        "--progress",
        "run/progress.md",
        "--new",
        cwd=where,
        env=flow_env(**env),
    )


def _result(where: Path) -> str:
    """The tool result the run recorded."""
    from promptflow_resume.progress import load_progress

    run, _ = load_progress(where / "run" / "progress.md")
    (entry,) = [e for e in run.transcript if e.role == "tool_result"]
    return entry.content


# --- SSE -----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def sse_url() -> Iterator[str]:
    """The ``/sse`` endpoint of the results server, started for the test."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--sse", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/sse"
    finally:
        proc.terminate()
        proc.wait(10)


def test_an_sse_server_is_used_like_any_other(tmp_path: Path, sse_url: str) -> None:
    where = _workspace(tmp_path, {"legacy": {"type": "sse", "url": sse_url}}, tools="['legacy/*']")
    done = _run(where)
    assert done.returncode == 0, done.stderr
    assert _result(where) == "line 00000"

    checked = flow("check", "ask.prompt.md", "--mcp", "--json", cwd=where)
    assert checked.returncode == 0, checked.stderr
    plan = json.loads(checked.stdout)["workflows"][0]
    assert "big_text" in [t["tool"] for t in plan["mcp"]["tools"]]


# --- entries a run does not use ------------------------------------------------------------


def test_an_unused_sse_entry_does_not_stop_a_run(tmp_path: Path) -> None:
    servers = {"results": STDIO, "old": {"type": "sse", "url": "http://127.0.0.1:9/sse"}}
    where = _workspace(tmp_path, servers)
    done = _run(where)
    assert done.returncode == 0, done.stderr
    assert _result(where) == "line 00000"


def test_a_broken_unused_entry_is_a_warning_and_a_used_one_an_error(tmp_path: Path) -> None:
    servers = {"results": STDIO, "broken": {"args": ["no command"]}}
    where = _workspace(tmp_path, servers)
    done = _run(where)
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert "the MCP server `broken` is skipped" in said
    assert "needs a `command`" in said

    checked = flow("check", "ask.prompt.md", "--json", cwd=where)
    assert checked.returncode == 0, checked.stderr
    plan = json.loads(checked.stdout)["workflows"][0]
    assert plan["warnings"] == 1
    assert "`broken` is skipped" in plan["diagnostics"][0]["message"]

    (where / "ask.prompt.md").write_text(_workflow("['broken/*']"), encoding="utf-8")
    checked = flow("check", "ask.prompt.md", cwd=where)
    assert checked.returncode == EXIT_INVALID_FILE
    assert "$.servers.broken.command" in checked.stdout + checked.stderr
    done = _run(where)
    assert done.returncode == EXIT_INVALID_FILE
    assert "needs a `command`" in done.stdout + done.stderr


def test_an_unused_server_is_not_asked_for_its_inputs(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "inputs": [{"type": "promptString", "id": "other-token", "password": True}],
                "servers": {
                    "results": STDIO,
                    "other": {"command": "x", "env": {"TOKEN": "${input:other-token}"}},
                },
            }
        ),
        encoding="utf-8",
    )
    loaded = load_configs([config], workspace=tmp_path, env={}, wanted=["results/*"])
    assert list(loaded.servers) == ["results", "other"]
    assert loaded.secrets == ()


# --- .mcp.json -----------------------------------------------------------------------------


def test_the_repository_root_mcp_json_is_read(tmp_path: Path) -> None:
    where = _workspace(tmp_path, {}, root={"results": STDIO})
    done = _run(where)
    assert done.returncode == 0, done.stderr
    assert _result(where) == "line 00000"


def test_vscode_mcp_json_wins_over_the_root_file_and_a_difference_is_warned(
    tmp_path: Path,
) -> None:
    root = {
        "results": {"command": "no-such-program-xyz"},
        "extra": {"command": sys.executable, "args": [str(SERVER)]},
    }
    where = _workspace(tmp_path, {"results": STDIO}, root=root)
    paths = find_configs(where)
    assert paths == [where / ".vscode" / "mcp.json", where / ".mcp.json"]
    loaded = load_configs(paths, workspace=where, env={}, wanted=["results/*"])
    assert loaded.servers["results"].command == sys.executable
    assert list(loaded.servers) == ["results", "extra"]
    (warning,) = loaded.warnings
    assert "`results` is defined differently" in warning
    assert "mcp.json is used" in warning

    done = _run(where)
    assert done.returncode == 0, done.stderr
    assert "`results` is defined differently" in done.stdout + done.stderr

    # The same entry in both files is no news.
    (where / ".mcp.json").write_text(json.dumps({"servers": {"results": STDIO}}), "utf-8")
    trusted(where)
    assert load_configs(find_configs(where), workspace=where, env={}).warnings == ()


def test_a_broken_root_entry_for_a_name_vscode_defines_is_not_an_error(tmp_path: Path) -> None:
    where = _workspace(tmp_path, {"results": STDIO}, root={"results": {"type": "ws"}})
    loaded = load_configs(find_configs(where), workspace=where, env={}, wanted=["results/*"])
    assert loaded.servers["results"].command == sys.executable
    with pytest.raises(McpConfigError):
        load_configs([where / ".mcp.json"], workspace=where, env={}, wanted=["results/*"])


# --- the environment a server gets ---------------------------------------------------------


def test_a_stdio_server_gets_flows_environment_plus_env_without_flows_secrets(
    tmp_path: Path,
) -> None:
    entry = dict(STDIO, env={"CONFIGURED": "from-config", "SHARED": "config-wins"})
    where = _workspace(tmp_path, {"results": entry})
    env = {
        "TEAM_SETTING": "inherited",
        "SHARED": "flow",
        "OPENAI_API_KEY": "sk-flows-own-key-000000000000",
        "FLOW_MCP_INPUT_OTHER": "another-servers-secret",
    }
    names = ("TEAM_SETTING", "CONFIGURED", "SHARED", "OPENAI_API_KEY", "FLOW_MCP_INPUT_OTHER")
    calls = [{"name": "env_var", "arguments": {"name": name}} for name in names]
    script = {"replies": [{"content": "", "tool_calls": calls}, "Done."]}
    (where / "ask.script.yaml").write_text(json.dumps(script), encoding="utf-8")
    done = _run(where, **env)
    assert done.returncode == 0, done.stderr
    from promptflow_resume.progress import load_progress

    run, _ = load_progress(where / "run" / "progress.md")
    results = [e.content for e in run.transcript if e.role == "tool_result"]
    seen = dict(zip(names, results, strict=True))
    assert seen == {
        "TEAM_SETTING": "inherited",
        "CONFIGURED": "from-config",
        "SHARED": "config-wins",
        "OPENAI_API_KEY": "(unset)",
        "FLOW_MCP_INPUT_OTHER": "(unset)",
    }


# --- tools that run only as tasks ----------------------------------------------------------


def test_task_only_tools_are_not_offered_and_check_says_so(tmp_path: Path) -> None:
    where = _workspace(tmp_path, {"results": STDIO})
    config = load_configs(find_configs(where), workspace=where, env={}, wanted=["results/*"])
    with McpServers(config, wanted=["results/*"]) as servers:
        offered = servers.offer()
        assert "research" not in offered and "big_text" in offered
        assert servers.task_only() == {"results": ["research"]}
        result = servers.tools["big_text"].run({"size": 4}, ToolContext(where))
        assert result.content == "line"

    checked = flow("check", "ask.prompt.md", "--mcp", cwd=where)
    assert checked.returncode == 0, checked.stderr
    lines = [line for line in checked.stdout.splitlines() if "MCP tasks" in line]
    assert len(lines) == 1
    assert "`results`" in lines[0] and "`research`" in lines[0] and "not offered" in lines[0]

    done = _run(where)
    assert done.returncode == 0, done.stderr
    assert "`research`" in done.stdout + done.stderr
