"""The exact words ``flow check``, ``flow run`` and the resume note use about tools: an MCP
``server/*`` shows on the step line, a missing MCP tool is "server X has no tool Y", an
editor-only tool gets one line (not a second one calling it a missing MCP tool), and the
resume note counts only the results reused and names the calls that ran again."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from pathlib import Path

from promptflow_resume.progress import load_progress
from tests import support
from tests.support.flowproc import flow, flow_env, spawn
from tests.support.trust import trusted

SERVER = support.SUPPORT / "mcp_servers.py"


def _workspace(tmp_path: Path, tools: str) -> Path:
    """A workspace whose .vscode/mcp.json configures the real ``notes`` server."""
    where = tmp_path / "ws"
    (where / ".vscode").mkdir(parents=True)
    config = {
        "servers": {
            "notes": {"command": sys.executable, "args": [str(SERVER), "${workspaceFolder}/state"]}
        }
    }
    (where / ".vscode" / "mcp.json").write_text(json.dumps(config), encoding="utf-8")
    (where / "notes.prompt.md").write_text(
        f"---\ndescription: Keep notes\nprovider: scripted\ntools: {tools}\n---\n"
        "You keep notes.\n\n## Step 1: Write\nWrite the note.\n",
        encoding="utf-8",
    )
    return trusted(where)


def test_check_shows_mcp_tools_on_the_step_line(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "['notes/*']")
    result = flow("check", "notes.prompt.md", cwd=where)
    assert result.returncode == 0, result.stderr
    [step] = [line for line in result.stdout.splitlines() if line.startswith("    1.  ")]
    assert re.fullmatch(r"    1\.  write  Write  prompt  tools: notes/\*  [0-9a-f]{12}", step)
    assert "tools: none" not in result.stdout
    plan = json.loads(flow("check", "notes.prompt.md", "--json", cwd=where).stdout)
    assert plan["workflows"][0]["steps"][0]["tools"] == ["notes/*"]


def test_check_says_which_server_lacks_a_tool(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "['notes/nosuch', 'read_file']")
    result = flow("check", "--mcp", "notes.prompt.md", cwd=where)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    [warning] = [line for line in lines if "nosuch" in line and "warning:" in line]
    assert warning.startswith(
        "    notes.prompt.md:4:9: warning: $.tools[0]: server `notes` has no tool `nosuch` "
        "(it has: append_note, "
    )
    assert warning.endswith("), so `notes/nosuch` is not offered.")
    assert "read_notes" in warning
    [row] = [line for line in lines if line.startswith("    notes/nosuch ")]
    assert re.fullmatch(
        r"    notes/nosuch +not offered: server `notes` has no tool `nosuch` .*", row
    )
    assert "neither a declared command" not in result.stdout
    assert "Built-in tools:" not in result.stdout  # the built-in list answers another problem
    [step] = [line for line in lines if line.startswith("    1.  ")]
    assert "tools: read_file  " in step


def test_an_editor_only_tool_gets_one_line(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "['execute/getTerminalOutput', 'read_file']")
    (where / "notes.script.yaml").write_text('replies: ["Noted."]\n', encoding="utf-8")
    run = flow("run", "notes.prompt.md", "--recording", "notes.script.yaml", cwd=where)
    assert run.returncode == 0, run.stderr
    said = [line for line in run.stderr.splitlines() if "getTerminalOutput" in line]
    assert said == [
        "flow: editor-only tools not offered outside VS Code: `execute/getTerminalOutput`."
    ]
    assert not (where / "state").exists()  # no MCP server was started for it

    check = flow("check", "--mcp", "notes.prompt.md", cwd=where)
    said = [line for line in check.stdout.splitlines() if "getTerminalOutput" in line]
    assert said == [
        "    execute/getTerminalOutput  editor-only: not offered outside VS Code",
        "    notes.prompt.md:4:9: warning: $.tools: editor-only tools not offered outside VS "
        "Code: `execute/getTerminalOutput`.",
    ]


SLOW = """\
---
description: Count bees
provider: scripted
commands:
  count:
    description: Count the bees (slowly the first time)
    argv: ["sh", "-c", "if [ -e started ]; then echo 12 bees; else touch started; sleep 60; fi"]
    idempotent: true
tools: [read_file, count]
---
You count bees.

## Step 1: Count
Count the bees.
"""

SCRIPT = """\
replies:
  - content: "Reading the notes first."
    tool_calls:
      - {name: read_file, arguments: {path: notes.txt}}
  - content: "Counting."
    tool_calls:
      - {name: count, arguments: {}}
  - content: "There are 12 bees."
"""


def test_the_resume_note_counts_reused_results_and_names_the_call_run_again(
    tmp_path: Path,
) -> None:
    where = tmp_path / "bees"
    where.mkdir()
    (where / "bees.prompt.md").write_text(SLOW, encoding="utf-8")
    (where / "bees.script.yaml").write_text(SCRIPT, encoding="utf-8")
    (where / "notes.txt").write_text("the hive is east\n", encoding="utf-8")
    args = ("bees.prompt.md", "--recording", "bees.script.yaml", "--progress", "run/progress.md")
    proc = spawn("run", *args, "--new", cwd=where, env=flow_env(), session=True)
    deadline = time.monotonic() + 60
    while not (where / "started").exists() and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)  # flow and the command it runs
    proc.communicate()

    resumed = flow("resume", "run/progress.md", cwd=where)
    assert resumed.returncode == 0, resumed.stderr
    run, _ = load_progress(where / "run" / "progress.md")
    rows = [(e.role, e.tool, e.content) for e in run.transcript]
    [note_at] = [i for i, row in enumerate(rows) if row[0] == "note"]
    # The call cut off ran again; its new result comes just before the note.
    assert rows[note_at - 1][:2] == ("tool_result", "count")
    assert rows[note_at - 1][2].endswith("12 bees\n")
    [call] = [e for e in run.transcript if e.role == "tool_call" and e.tool == "count"]
    assert rows[note_at][2] == (
        "Note from flow: this run was resumed after it stopped: interrupted (the process "
        "running it ended without a checkpoint). Already done: no step completed yet; "
        "1 tool result recorded before it stopped is reused as recorded, not run again. "
        f"This call was interrupted before its result was recorded and ran again "
        f"(idempotent): count ({call.call_id}); its result above is from this run. "
        "Continue with Count from where the conversation left off."
    )
