"""``flow`` with MCP servers, as a real subprocess: a prompt file with ``tools: ['notes/*']`` and
a ``.vscode/mcp.json`` runs against the SDK server in ``tests/support/mcp_servers.py``; ``flow`` is
killed with SIGKILL in the middle of a call and resumed: an idempotent or read-only call runs
again, any other stops for review and never runs twice; no server outlives ``flow``; planted
secrets never reach the disk."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

from promptflow_resume.base.errors import (
    EXIT_INVALID_FILE,
    EXIT_NEEDS_REVIEW,
    EXIT_TOOL_SERVER,
)
from promptflow_resume.progress import load_progress
from promptflow_resume.run.reconcile import PLACEHOLDER_RESULT
from tests import support
from tests.support.flowproc import flow, flow_env, spawn
from tests.support.trust import trusted

SERVER = support.SUPPORT / "mcp_servers.py"
SECRET = "tok-planted-4c1d2e3f9a8b7"

WORKFLOW = """---
description: Keep the team notes
provider: scripted
tools: ['notes/*']
---
You keep the team's notes.

## Step 1: Write
Write the note, then say what the notes hold.
"""


def _workspace(
    tmp_path: Path,
    tool: str,
    arguments: dict[str, str],
    workflows: dict[str, str] | None = None,
) -> Path:
    """A workspace with the notes server configured, whose scripted model
    (``notes.script.yaml``) calls ``tool`` once, then answers; ``workflows`` are the files
    written beside it (by default ``notes.prompt.md``, a workflow offering ``notes/*``)."""
    where = tmp_path / "ws"
    (where / ".vscode").mkdir(parents=True)
    for name, text in (workflows or {"notes.prompt.md": WORKFLOW}).items():
        (where / name).write_text(text, encoding="utf-8")
    script = {
        "replies": [
            {
                "content": "Calling the notes server.",
                "tool_calls": [{"name": tool, "arguments": arguments}],
            },
            "The notes are up to date.",
        ]
    }
    (where / "notes.script.yaml").write_text(json.dumps(script), encoding="utf-8")
    config = {
        "inputs": [{"type": "promptString", "id": "notes-token", "password": True}],
        "servers": {
            "notes": {
                "command": sys.executable,
                "args": [str(SERVER), "${workspaceFolder}/state"],
                "env": {"NOTES_TOKEN": "${input:notes-token}"},
            }
        },
    }
    (where / ".vscode" / "mcp.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    trusted(where)
    return where


RUN = (
    "run",
    "notes.prompt.md",
    "--recording",
    "notes.script.yaml",
    "--progress",
    "run/progress.md",
    "--new",
)


def _env() -> dict[str, str]:
    return flow_env(FLOW_MCP_INPUT_NOTES_TOKEN=SECRET)


def _calls(where: Path) -> list[str]:
    log = where / "state" / "calls.log"
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def _gone(pid: int, seconds: float = 20) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def _kill_mid_call(where: Path, hold: str = "hold") -> int:
    """Start ``flow run``, SIGKILL it while the server holds the call; the server's pid.

    ``hold``: ``hold`` stops the call before its effect, ``hold-after`` after it.
    """
    state = where / "state"
    state.mkdir()
    (state / hold).write_text("", encoding="utf-8")
    proc = spawn(*RUN, cwd=where, env=_env())
    deadline = time.monotonic() + 60
    while not (state / "holding").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the call never reached the server"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    pid = int((state / "pid").read_text())
    # The server dies with flow (its parent-death signal) in the middle of the call: while
    # the call still waits, so the server could not have ended on its own.
    assert _gone(pid), "the MCP server outlived flow"
    (state / hold).unlink()
    (state / "holding").unlink()
    return pid


def _secret_on_disk(where: Path) -> list[Path]:
    found = []
    for path in (where / "run").rglob("*"):
        if path.is_file() and SECRET.encode() in path.read_bytes():
            found.append(path)
    return found


def test_a_prompt_file_runs_against_a_real_mcp_server(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "append_note", {"text": "ship on Friday"})
    result = flow(*RUN, cwd=where, env=_env())
    assert result.returncode == 0, result.stderr
    run, _ = load_progress(where / "run" / "progress.md")
    results = [e for e in run.transcript if e.role == "tool_result"]
    assert [(e.tool, e.content, e.is_error) for e in results] == [
        ("append_note", "appended: ship on Friday", False)
    ]
    assert run.attempts[0].notes[0].startswith("mcp tools: notes=sha256:")
    assert _calls(where) == ["append_note ship on Friday"]
    assert _gone(int((where / "state" / "pid").read_text()))


def test_planted_secrets_in_server_env_and_output_never_reach_disk(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "leak", {})
    result = flow(*RUN, cwd=where, env=_env())
    assert result.returncode == 0, result.stderr
    run, _ = load_progress(where / "run" / "progress.md")
    leaked = next(e for e in run.transcript if e.role == "tool_result")
    assert leaked.content.startswith("the token is [REDACTED")
    assert (where / "run" / "mcp-notes.stderr.log").read_text().count("token is [REDACTED") == 1
    assert _secret_on_disk(where) == []


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [("read_notes", {}), ("set_note", {"text": "ship on Friday"})],
    ids=["read-only", "idempotent"],
)
def test_sigkill_mid_call_of_a_safe_tool_resumes_by_running_it_again(
    tmp_path: Path, tool: str, arguments: dict[str, str]
) -> None:
    where = _workspace(tmp_path, tool, arguments)
    server = _kill_mid_call(where)
    assert _gone(server), "the MCP server outlived flow"
    run, _ = load_progress(where / "run" / "progress.md")
    assert [f.tool for f in run.in_flight] == [tool]
    status = flow("status", "run/progress.md", "--json", cwd=where, env=_env())
    document = json.loads(status.stdout)
    assert document["can_resume"] and document["retry_tools"] == ["call_0_0"], status.stdout

    result = flow("resume", "run/progress.md", cwd=where, env=_env())
    assert result.returncode == 0, result.stderr
    assert len(_calls(where)) == 2  # the interrupted call, and its re-run
    run, _ = load_progress(where / "run" / "progress.md")
    assert run.status == "completed" and run.in_flight == []
    assert [e.tool for e in run.transcript if e.role == "tool_result"] == [tool]
    # Started by the run and by the resume: `flow status` starts nothing (docs/spec.md 10.3).
    assert len((where / "state" / "starts").read_text().split()) == 2
    assert _gone(int((where / "state" / "pid").read_text()))


def test_sigkill_mid_call_of_an_unsafe_tool_needs_review_and_never_runs_twice(
    tmp_path: Path,
) -> None:
    where = _workspace(tmp_path, "append_note", {"text": "ship on Friday"})
    server = _kill_mid_call(where, "hold-after")  # the note is written, the answer is lost
    assert _gone(server), "the MCP server outlived flow"
    progress = where / "run" / "progress.md"
    status = flow("status", "run/progress.md", "--json", cwd=where, env=_env())
    document = json.loads(status.stdout)
    assert not document["can_resume"] and document["review_tools"] == ["call_0_0"]

    for _ in range(2):  # asking again changes nothing
        result = flow("resume", "run/progress.md", cwd=where, env=_env())
        assert result.returncode == EXIT_NEEDS_REVIEW, result.stderr
        assert "append_note" in result.stderr and "--rerun-unsafe" in result.stderr
        assert "Traceback" not in result.stderr
    assert _calls(where) == ["append_note ship on Friday"]

    # A person checks the notes (the line is there) and writes the result into the file.
    notes = (where / "state" / "notes.txt").read_text(encoding="utf-8")
    assert notes == "ship on Friday\n"
    text = progress.read_text(encoding="utf-8")
    progress.write_text(text.replace(PLACEHOLDER_RESULT, "appended: ship on Friday"), "utf-8")
    result = flow("resume", "run/progress.md", cwd=where, env=_env())
    assert result.returncode == 0, result.stderr
    assert _calls(where) == ["append_note ship on Friday"]
    assert (where / "state" / "notes.txt").read_text(encoding="utf-8") == notes
    run, _ = load_progress(progress)
    assert run.status == "completed"


def test_a_server_dying_mid_call_stops_the_run_resumably(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "crash", {})
    result = flow(*RUN, cwd=where, env=_env())
    assert result.returncode == EXIT_TOOL_SERVER, result.stderr
    assert "Traceback" not in result.stderr
    assert ".vscode/mcp.json" in result.stderr and "`notes` failed during a call" in result.stderr
    run, _ = load_progress(where / "run" / "progress.md")
    assert run.status == "failed"
    assert [f.tool for f in run.in_flight] == ["crash"]
    # Not idempotent: resume asks a person instead of crashing the server again.
    result = flow("resume", "run/progress.md", cwd=where, env=_env())
    assert result.returncode == EXIT_NEEDS_REVIEW, result.stderr
    assert _calls(where) == ["crash "]


def test_config_errors_are_clear_and_positioned(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "read_notes", {})
    config = where / ".vscode" / "mcp.json"
    config.write_text('{\n  "servers": {\n    "notes": {"args": []}\n  }\n}\n', "utf-8")
    trusted(where)
    before = config.read_bytes()
    result = flow(*RUN, cwd=where, env=_env())
    assert result.returncode == EXIT_INVALID_FILE
    assert ".vscode/mcp.json:3: $.servers.notes.command:" in result.stderr
    assert "Traceback" not in result.stderr
    assert config.read_bytes() == before
    assert not (where / "run" / "progress.md").exists()


def test_a_missing_input_without_a_terminal_says_which_variable_to_set(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "read_notes", {})
    result = flow(*RUN, cwd=where, env=flow_env())
    assert result.returncode == 9, result.stderr
    assert "FLOW_MCP_INPUT_NOTES_TOKEN" in result.stderr


def test_mcp_config_flag_with_the_mcp_servers_layout(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "stats", {})
    (where / ".vscode" / "mcp.json").unlink()
    other = where / "servers.json"
    other.write_text(
        json.dumps(
            {"mcpServers": {"notes": {"command": sys.executable, "args": [str(SERVER), "state"]}}}
        ),
        encoding="utf-8",
    )
    result = flow(*RUN, "--mcp-config", "servers.json", cwd=where, env=_env())
    assert result.returncode == 0, result.stderr
    run, _ = load_progress(where / "run" / "progress.md")
    stats = next(e for e in run.transcript if e.role == "tool_result")
    assert json.loads(stats.content) == {"notes": 0}


def test_a_server_that_cannot_start_fails_before_a_run_exists(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "read_notes", {})
    config = where / ".vscode" / "mcp.json"
    config.write_text(json.dumps({"servers": {"notes": {"command": "no-such-server-x"}}}))
    trusted(where)
    result = flow(*RUN, cwd=where, env=_env())
    assert result.returncode == EXIT_TOOL_SERVER
    assert "could not be started" in result.stderr and "no-such-server-x" in result.stderr
    assert not (where / "run" / "progress.md").exists()


def test_the_server_is_stopped_when_flow_is_interrupted(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "read_notes", {})
    state = where / "state"
    state.mkdir()
    (state / "hold").write_text("", encoding="utf-8")
    proc = spawn(*RUN, cwd=where, env=_env())
    while not (state / "holding").exists():
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    (state / "hold").unlink()
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert _gone(int((state / "pid").read_text()))
    run, _ = load_progress(where / "run" / "progress.md")
    assert run.status == "interrupted"


def test_check_names_the_server_without_starting_it(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "read_notes", {})
    result = flow("check", "notes.prompt.md", "--json", cwd=where, env=flow_env())
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)["workflows"][0]
    assert plan["warnings"] == 0 and plan["diagnostics"] == []  # no unknown-tool warning
    assert [(t["name"], t["kind"], t["resolves_to"]) for t in plan["tools"]] == [
        ("notes/*", "mcp", ["MCP server notes"])
    ]
    assert plan["mcp"]["servers"] == ["notes"] and plan["mcp"]["started"] is False
    assert not (where / "state").exists()  # nothing was started, no secret was needed


def test_check_with_mcp_lists_the_tools_a_run_would_get(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "read_notes", {})
    result = flow("check", "notes.prompt.md", "--mcp", "--json", cwd=where, env=_env())
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)["workflows"][0]
    tools = {t["name"]: t for t in plan["mcp"]["tools"]}
    assert tools["read_notes"]["read_only"] and tools["read_notes"]["idempotent"]
    assert tools["set_note"]["idempotent"] and not tools["set_note"]["read_only"]
    assert not tools["append_note"]["idempotent"]
    assert plan["tools"][0]["resolves_to"][:3] == ["read_notes", "append_note", "set_note"]
    assert _gone(int((where / "state" / "pid").read_text()))


def test_check_prints_the_mcp_tools() -> None:
    from promptflow_resume.tools.mcp_check import format_mcp

    plan = {
        "mcp": {
            "config": ".vscode/mcp.json",
            "servers": ["notes"],
            "started": True,
            "tools": [
                {
                    "name": "read_notes",
                    "server": "notes",
                    "tool": "read_notes",
                    "read_only": True,
                    "idempotent": True,
                },
                {
                    "name": "append_note",
                    "server": "notes",
                    "tool": "append_note",
                    "read_only": False,
                    "idempotent": False,
                },
            ],
        }
    }
    assert format_mcp(plan) == (
        "  mcp       .vscode/mcp.json (servers: notes)\n"
        "  mcp tools (2)\n"
        "    read_notes   notes/read_notes   read-only\n"
        "    append_note  notes/append_note  not idempotent: a call cut short is reviewed, "
        "not re-run"
    )


def test_a_changed_tool_list_is_reported_on_resume(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "set_note", {"text": "ship on Friday"})
    _kill_mid_call(where)
    (where / "state" / "more-tools").write_text("", encoding="utf-8")
    result = flow("resume", "run/progress.md", cwd=where, env=_env())
    assert result.returncode == 0, result.stderr
    assert "the tool list of MCP server(s) notes changed since the last attempt" in result.stderr
    run, _ = load_progress(where / "run" / "progress.md")
    hashes = [n for a in run.attempts for n in a.notes if n.startswith("mcp tools: notes=")]
    assert len(hashes) == 2 and hashes[0] != hashes[1]


def test_names_nothing_provides_are_announced_once(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "read_notes", {})
    (where / ".vscode" / "mcp.json").unlink()
    (where / "notes.script.yaml").write_text(json.dumps({"replies": ["Nothing to do."]}))
    result = flow(*RUN, cwd=where, env=_env())
    assert result.returncode == 0, result.stderr
    assert "the workflow names `notes/*`, which no built-in, command or MCP server" in result.stderr

    text = WORKFLOW.replace("['notes/*']", "['notes/read_notes', 'notes/nothing']")
    (where / "notes.prompt.md").write_text(text, encoding="utf-8")
    _workspace(tmp_path / "again", "read_notes", {})
    (where / ".vscode" / "mcp.json").write_text(
        (tmp_path / "again" / "ws" / ".vscode" / "mcp.json").read_text()
    )
    trusted(where)
    shutil.rmtree(where / "run")
    result = flow(*RUN, cwd=where, env=_env())
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("provides `notes/nothing`; they are not offered") == 1


def test_servers_come_from_the_workspace_never_from_the_progress_file(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "set_note", {"text": "ship on Friday"})
    _kill_mid_call(where)
    (where / ".vscode" / "mcp.json").unlink()
    # The run's files name the server's tools, but without a configuration nothing starts, and
    # an in-flight call of a tool nobody provides now is not re-run: resume names the
    # configuration the call was started from.
    result = flow("resume", "run/progress.md", cwd=where, env=_env())
    assert result.returncode == EXIT_TOOL_SERVER, result.stderr
    assert "no server in the configuration in use provides the tool" in result.stderr
    assert "--mcp-config .vscode/mcp.json" in result.stderr
    assert len((where / "state" / "starts").read_text().split()) == 1
    assert _calls(where) == ["set_note ship on Friday"]


def test_without_the_mcp_extra_the_error_says_what_to_install(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "read_notes", {})
    shadow = tmp_path / "no-mcp" / "mcp"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('mcp is not installed here')\n")
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join((str(shadow.parent), env["PYTHONPATH"]))
    result = flow(*RUN, cwd=where, env=env)
    assert result.returncode == EXIT_TOOL_SERVER, result.stderr
    assert "pip install 'promptflow-resume[mcp]'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (where / "state").exists()


@pytest.mark.slow
def test_sigkill_before_an_unsafe_call_took_effect_then_rerun_unsafe(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "append_note", {"text": "ship on Friday"})
    server = _kill_mid_call(where)  # killed while the call waits before its effect
    assert _gone(server), "the MCP server outlived flow"
    assert not (where / "state" / "notes.txt").exists()  # the server died before writing
    result = flow("resume", "run/progress.md", cwd=where, env=_env())
    assert result.returncode == EXIT_NEEDS_REVIEW, result.stderr
    # A person sees that the note is missing and chooses to run the call again.
    result = flow("resume", "run/progress.md", "--rerun-unsafe", cwd=where, env=_env())
    assert result.returncode == 0, result.stderr
    assert (where / "state" / "notes.txt").read_text(encoding="utf-8") == "ship on Friday\n"
    assert _calls(where) == ["append_note ship on Friday"] * 2
