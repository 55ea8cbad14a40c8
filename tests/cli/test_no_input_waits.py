"""Given no terminal and no stdin, no ``flow`` command waits for input (docs/spec.md 4.16).

Every command of ``cli.COMMANDS``, and each path that can ask a person something (a missing
input, the similar-run offer, consent for a model-chosen command, an MCP input variable, a
changed workflow, an agent without a task), runs with stdin closed two ways: ``/dev/null``
and a pipe closed at once. Each must end by itself with a documented exit code and without a
traceback; a process still running after the timeout is a command that waits.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from promptflow_resume.cli import COMMANDS
from tests.support.flowproc import FLOW, flow_env
from tests.support.trust import trusted

#: docs/spec.md section 7.
DOCUMENTED = {*range(0, 15), 130}
#: Seconds a command may take; far more than any of these needs.
TIMEOUT = 60

WORKFLOW = """\
---
description: Greet a topic, then ask a person
provider: scripted
---
## Step 1: Greet
Say hello to ${input:topic}.

## Step 2: Approve
> kind: human

Was the greeting right?
"""

CONSENT = """\
---
description: Run a command the model chooses
provider: scripted
tools: [run_in_terminal]
---
List the files.
"""

AGENT = """\
---
name: helper
description: Helps with small tasks
---
You help with small tasks.
"""

SCRIPT = {
    "replies": [
        {
            "content": "Running it.",
            "tool_calls": [{"name": "run_in_terminal", "arguments": {"command": "ls"}}],
        },
        "Hello.",
        "Done.",
    ]
}

MCP = {
    "inputs": [{"type": "promptString", "id": "token", "password": True}],
    "servers": {
        "notes": {
            "command": sys.executable,
            "args": ["-c", "import time; time.sleep(30)"],
            "env": {"NOTES_TOKEN": "${input:token}"},
        }
    },
}


def _run(args: tuple[str, ...], cwd: Path, how: str) -> subprocess.CompletedProcess[str]:
    """``flow ARGS`` with stdin closed (``how``: devnull or closed-pipe), under the timeout."""
    env = flow_env()
    env.pop("FLOW_EVENTS", None)
    proc = subprocess.Popen(
        [*FLOW, *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL if how == "devnull" else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if proc.stdin is not None:
        proc.stdin.close()  # the reading end sees end of file at once
        proc.stdin = None
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"flow {' '.join(args)} waited (stdin {how}) past {TIMEOUT}s: {err[-500:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _ended(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode in DOCUMENTED, (done.returncode, done.stderr[-1000:])
    assert "Traceback" not in done.stderr, done.stderr[-2000:]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with workflows, an agent, a script and a run stopped for a person's answer."""
    where = tmp_path_factory.mktemp("quiet")
    (where / "greet.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    (where / "consent.prompt.md").write_text(CONSENT, encoding="utf-8")
    (where / "helper.agent.md").write_text(AGENT, encoding="utf-8")
    (where / "script.yaml").write_text(json.dumps(SCRIPT), encoding="utf-8")
    (where / "rows.jsonl").write_text('{"topic": "pears"}\n', encoding="utf-8")
    args = ("run", "greet.prompt.md", "--recording", "script.yaml", "--input", "topic=figs")
    first = _run((*args, "--progress", "run/progress.md", "--new"), where, "devnull")
    assert first.returncode == 11, first.stderr
    return where


#: Arguments that make each command do its real work on the workspace.
COMMAND_ARGS: dict[str, tuple[str, ...]] = {
    "run": ("greet.prompt.md", "--recording", "script.yaml", "--input", "topic=plums"),
    "resume": ("run/progress.md",),
    "status": ("run/progress.md",),
    "batch": ("greet.prompt.md", "--data", "rows.jsonl", "--recording", "script.yaml"),
    "check": ("greet.prompt.md",),
    "skills": (".",),
    "trust": (".",),
    "hooks": (),
    "validate": ("run/progress.md",),
    "show": ("run/progress.md",),
    "schema": ("events",),
    "list": (".",),
    "detect": ("greet.prompt.md",),
    "share": ("run/progress.md",),
    "fork": ("run/progress.md",),
    "rewind": ("run/progress.md",),
    "log": ("run/progress.md",),
    "diff": ("run/progress.md", "run/progress.md"),
    "ci": (),
    "clean": (".",),
    "review": ("run/progress.md",),
    "merge": ("run/progress.md",),
    "discard": ("run/progress.md",),
    "compact": ("run/progress.md",),
    "agents": (),
    "approve": ("run/progress.md", "--all"),
    "deny": ("run/progress.md", "--call", "call_0", "--reason", "not now"),
    "answer": ("run/progress.md", "--text", "yes"),
    # A server runs until stopped: a missing folder ends it at once (it never reads stdin).
    "serve": ("no-such-folder", "--port", "0"),
    "export": ("otel", "run/progress.md", "--file", "trace.json"),
}


def test_every_command_has_arguments_here() -> None:
    assert sorted(COMMANDS) == sorted(COMMAND_ARGS), "add the new command to COMMAND_ARGS"


@pytest.mark.parametrize("how", ["devnull", "closed-pipe"])
@pytest.mark.parametrize("name", sorted(COMMAND_ARGS))
def test_a_command_with_stdin_closed_never_waits(workspace: Path, name: str, how: str) -> None:
    _ended(_run((name, *COMMAND_ARGS[name]), workspace, how))


@pytest.mark.parametrize("how", ["devnull", "closed-pipe"])
def test_a_missing_input_is_an_error_not_a_question(workspace: Path, how: str) -> None:
    done = _run(("run", "greet.prompt.md", "--recording", "script.yaml", "--new"), workspace, how)
    _ended(done)
    assert done.returncode == 9 and "topic" in done.stderr


@pytest.mark.parametrize("how", ["devnull", "closed-pipe"])
def test_the_similar_run_offer_does_not_wait(workspace: Path, how: str) -> None:
    # The same workflow with other inputs: a similar incomplete run, offered on a terminal only.
    args = ("run", "greet.prompt.md", "--recording", "script.yaml", "--input", "topic=figs")
    _ended(_run(args, workspace, how))


@pytest.mark.parametrize("how", ["devnull", "closed-pipe"])
def test_consent_for_a_model_chosen_command_is_refused_not_asked(workspace: Path, how: str) -> None:
    args = ("run", "consent.prompt.md", "--recording", "script.yaml", "--new")
    done = _run(args, workspace, how)
    _ended(done)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("how", ["devnull", "closed-pipe"])
def test_an_mcp_input_variable_is_not_asked_for(tmp_path: Path, how: str) -> None:
    (tmp_path / ".vscode").mkdir()
    (tmp_path / ".vscode" / "mcp.json").write_text(json.dumps(MCP), encoding="utf-8")
    trusted(tmp_path)
    (tmp_path / "notes.prompt.md").write_text(
        "---\ndescription: Use the notes\nprovider: scripted\ntools: [notes/*]\n---\nRead.\n",
        encoding="utf-8",
    )
    (tmp_path / "script.yaml").write_text(json.dumps({"replies": ["Read."]}), encoding="utf-8")
    done = _run(("run", "notes.prompt.md", "--recording", "script.yaml", "--new"), tmp_path, how)
    _ended(done)
    assert done.returncode != 0 and "token" in done.stderr


@pytest.mark.parametrize("how", ["devnull", "closed-pipe"])
def test_a_changed_workflow_is_not_confirmed_by_asking(tmp_path: Path, how: str) -> None:
    (tmp_path / "greet.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    (tmp_path / "script.yaml").write_text(json.dumps(SCRIPT), encoding="utf-8")
    args = ("run", "greet.prompt.md", "--recording", "script.yaml", "--input", "topic=figs")
    first = _run((*args, "--progress", "run/progress.md", "--new"), tmp_path, how)
    assert first.returncode == 11, first.stderr
    changed = WORKFLOW.replace("Say hello to", "Say good morning to")
    (tmp_path / "greet.prompt.md").write_text(changed, encoding="utf-8")
    done = _run(("resume", "run/progress.md"), tmp_path, how)
    _ended(done)
    assert done.returncode == 7, done.stderr


@pytest.mark.parametrize("how", ["devnull", "closed-pipe"])
def test_an_agent_without_a_task_is_not_asked_for_one(workspace: Path, how: str) -> None:
    args = ("run", "helper.agent.md", "--provider", "echo", "--new")
    _ended(_run(args, workspace, how))
    _ended(_run((*args, "--task", "-"), workspace, how))
