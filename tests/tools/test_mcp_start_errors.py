"""An MCP server that fails to start says why: the error (exit 13, one paragraph) ends with the
server's last stderr lines, redacted; a new run leaves no folder behind that would hold
nothing but that log, and a run that already has events keeps its folder and the log."""

from __future__ import annotations

import json
import shlex
import signal
import sys
import time
from pathlib import Path

from promptflow_resume.base.errors import EXIT_TOOL_SERVER
from tests import support
from tests.support.flowproc import flow, flow_env, spawn
from tests.support.trust import trusted

SLOW_SERVER = support.SUPPORT / "mcp_slow_server.py"
SECRET = "sk-planted-secret-7f3a9c2e1d"
#: Twelve lines of noise, then what a real failure says: only the last ten are shown.
FAILING = (
    "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo noise $i >&2; done; "
    "echo 'npm error 404 Not Found - GET https://registry.npmjs.org/@nope%2fserver' >&2; "
    'echo "boom: missing config (token $API_TOKEN)" >&2; exit 3'
)
WORKFLOW = """---
description: Use the broken server
provider: scripted
tools: ['broken/*']
---
Use the tools.

## Step 1: Work
Call the tool.
"""


def _workspace(where: Path, script: str) -> Path:
    (where / ".vscode").mkdir(parents=True)
    (where / "w.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    call = {"name": "slow_write", "arguments": {"text": "x"}}
    replies = [{"content": "Writing.", "tool_calls": [call]}, "Done."]
    (where / "s.json").write_text(json.dumps({"replies": replies}), encoding="utf-8")
    entry = {"command": "sh", "args": ["-c", script], "env": {"API_TOKEN": SECRET}}
    (where / ".vscode" / "mcp.json").write_text(json.dumps({"servers": {"broken": entry}}))
    trusted(where)
    return where


def _check_message(stderr: str) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr  # one paragraph
    message = lines[0]
    assert "the MCP server `broken` could not be started" in message
    assert "npm error 404 Not Found" in message
    assert "boom: missing config (token [REDACTED" in message
    assert SECRET not in message
    assert "noise 5 |" in message and "noise 4 |" not in message  # the last ten lines


def test_a_failed_start_shows_the_servers_last_lines_and_leaves_no_run_folder(
    tmp_path: Path,
) -> None:
    where = _workspace(tmp_path, FAILING)
    result = flow("run", "w.prompt.md", "--recording", "s.json", "--new", cwd=where)
    assert result.returncode == EXIT_TOOL_SERVER, result.stderr
    _check_message(result.stderr)
    assert not (where / ".flow").exists(), sorted(p.name for p in (where / ".flow").rglob("*"))


def test_a_failed_start_keeps_a_folder_it_did_not_make(tmp_path: Path) -> None:
    where = _workspace(tmp_path, FAILING)
    (where / "run").mkdir()
    (where / "run" / "notes.txt").write_text("mine", encoding="utf-8")
    result = flow(
        "run", "w.prompt.md", "--recording", "s.json", "--new", "--progress", "run/p.md", cwd=where
    )
    assert result.returncode == EXIT_TOOL_SERVER, result.stderr
    _check_message(result.stderr)
    assert sorted(p.name for p in (where / "run").iterdir()) == [
        "mcp-broken.stderr.log",
        "notes.txt",
    ]


def test_a_failed_start_on_resume_keeps_the_run_and_its_log(tmp_path: Path) -> None:
    # A first attempt with a working server is killed in the middle of its call.
    server = shlex.join([sys.executable, str(SLOW_SERVER), str(tmp_path / "state"), "30"])
    where = _workspace(tmp_path, f"if [ -e broken ]; then {FAILING}; fi; exec {server}")
    run = ("run", "w.prompt.md", "--recording", "s.json", "--progress", "run/progress.md")
    proc = spawn(*run, "--new", cwd=where, env=flow_env())
    deadline = time.monotonic() + 60
    while not (tmp_path / "state" / "started").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    (where / "broken").touch()
    result = flow("resume", "run/progress.md", cwd=where)
    assert result.returncode == EXIT_TOOL_SERVER, result.stderr
    _check_message(result.stderr)
    assert (where / "run" / "progress.md").exists()
    log = (where / "run" / "mcp-broken.stderr.log").read_text(encoding="utf-8")
    assert "boom: missing config" in log and SECRET not in log
    assert "Its error output is in run/mcp-broken.stderr.log." in result.stderr
