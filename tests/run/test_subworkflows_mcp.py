"""A sub-workflow that names MCP tools gets its own MCP servers (docs/spec.md 4.10), durably.

The parent names no MCP tool (so it starts no server); its one step runs a child workflow
with ``tools: ['notes/*']`` against the real SDK server of ``tests/support/mcp_servers.py``, through
real ``flow`` subprocesses, killed with SIGKILL in the middle of the child's call.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from promptflow_resume.base.errors import EXIT_NEEDS_REVIEW, EXIT_TOOL_SERVER
from promptflow_resume.progress import load_progress
from tests.support.flowproc import flow, spawn
from tests.support.trust import trusted
from tests.tools.test_mcp_e2e import SECRET, _calls, _env, _gone
from tests.tools.test_mcp_e2e import _workspace as mcp_workspace

PARENT = """---
description: Keep the notes through a sub-workflow
provider: scripted
---
You run the notes workflow.

## Step 1: Notes {#notes}
> workflow: notes.prompt.md
"""

CHILD = """---
description: Keep the team notes
tools: ['notes/*']
---
You keep the team's notes.

## Step 1: Write
Write the note, then say what the notes hold.
"""

RUN = (
    "run",
    "parent.prompt.md",
    "--recording",
    "notes.script.yaml",
    "--progress",
    "run/progress.md",
    "--new",
)
CHILD_FILE = Path("run") / "progress.steps" / "notes" / "progress.md"


def _workspace(tmp_path: Path, tool: str, arguments: dict[str, str]) -> Path:
    """A workspace whose child's scripted model calls ``tool`` once, then answers."""
    return mcp_workspace(
        tmp_path, tool, arguments, {"parent.prompt.md": PARENT, "notes.prompt.md": CHILD}
    )


def _kill_mid_call(where: Path, hold: str) -> None:
    """Start ``flow run``, SIGKILL it while the server holds the child's call."""
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
    assert _gone(int((state / "pid").read_text())), "the MCP server outlived flow"
    (state / hold).unlink()
    (state / "holding").unlink()


def test_a_child_that_names_mcp_tools_gets_them(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "append_note", {"text": "ship on Friday"})
    result = flow(*RUN, cwd=where, env=_env())
    assert result.returncode == 0, result.stderr
    child, _ = load_progress(where / CHILD_FILE)
    assert [
        (e.tool, e.content, e.is_error) for e in child.transcript if e.role == "tool_result"
    ] == [("append_note", "appended: ship on Friday", False)]
    assert child.attempts[0].notes[0].startswith("mcp tools: notes=sha256:")
    assert _calls(where) == ["append_note ship on Friday"]
    # The server ran for the child only: its log is beside the child's file, and it stopped.
    assert (where / CHILD_FILE).parent.joinpath("mcp-notes.stderr.log").exists()
    assert not (where / "run" / "mcp-notes.stderr.log").exists()
    assert _gone(int((where / "state" / "pid").read_text()))
    parent, _ = load_progress(where / "run" / "progress.md")
    assert parent.status == "completed"
    assert parent.steps["notes"].output_entry is not None
    assert parent.transcript[-1].content == "The notes are up to date."


def test_a_childs_mcp_secrets_are_redacted(tmp_path: Path) -> None:
    # The parent names no MCP tool, so only the child's configuration knows the token.
    where = _workspace(tmp_path, "leak", {})
    result = flow(*RUN, cwd=where, env=_env())
    assert result.returncode == 0, result.stderr
    child, _ = load_progress(where / CHILD_FILE)
    leaked = next(e for e in child.transcript if e.role == "tool_result")
    assert leaked.content.startswith("the token is [REDACTED")
    log = (where / CHILD_FILE).parent / "mcp-notes.stderr.log"
    assert log.read_text().count("token is [REDACTED") == 1
    found = [
        p for p in (where / "run").rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()
    ]
    assert found == []


def test_sigkill_mid_call_in_a_child_reruns_a_read_only_call(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "read_notes", {})
    _kill_mid_call(where, "hold")
    child, _ = load_progress(where / CHILD_FILE)
    assert [f.tool for f in child.in_flight] == ["read_notes"]

    result = flow("resume", "run/progress.md", cwd=where, env=_env())
    assert result.returncode == 0, result.stderr
    assert len(_calls(where)) == 2  # the interrupted call, and its re-run
    child, _ = load_progress(where / CHILD_FILE)
    assert child.status == "completed" and child.in_flight == []
    assert [e.tool for e in child.transcript if e.role == "tool_result"] == ["read_notes"]
    parent, _ = load_progress(where / "run" / "progress.md")
    assert parent.status == "completed"
    assert _gone(int((where / "state" / "pid").read_text().split()[-1]))


@pytest.mark.slow
def test_sigkill_mid_call_in_a_child_never_runs_an_unsafe_call_twice(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "append_note", {"text": "ship on Friday"})
    _kill_mid_call(where, "hold-after")  # the note is written, the answer is lost

    for _ in range(2):
        result = flow("resume", "run/progress.md", cwd=where, env=_env())
        assert result.returncode == EXIT_NEEDS_REVIEW, result.stderr
        assert "append_note" in result.stderr and "Traceback" not in result.stderr
    assert _calls(where) == ["append_note ship on Friday"]
    child, _ = load_progress(where / CHILD_FILE)
    assert child.status == "needs_review"
    parent, _ = load_progress(where / "run" / "progress.md")
    assert parent.status == "needs_review"


def test_a_child_server_that_cannot_start_fails_the_parent_resumably(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "append_note", {"text": "ship on Friday"})
    config_file = where / ".vscode" / "mcp.json"
    good = config_file.read_text(encoding="utf-8")
    config = json.loads(good)
    config["servers"]["notes"]["command"] = str(tmp_path / "no-such-program")
    config_file.write_text(json.dumps(config), encoding="utf-8")
    trusted(config_file.parent.parent)

    result = flow(*RUN, cwd=where, env=_env())
    assert result.returncode == EXIT_TOOL_SERVER, result.stderr
    assert "`notes` could not be started" in result.stderr and "Traceback" not in result.stderr
    assert not (where / CHILD_FILE).exists()  # no child run was made
    parent, _ = load_progress(where / "run" / "progress.md")
    assert parent.status == "failed"

    config_file.write_text(good, encoding="utf-8")
    trusted(config_file.parent.parent)
    result = flow("resume", "run/progress.md", cwd=where, env=_env())
    assert result.returncode == 0, result.stderr
    assert _calls(where) == ["append_note ship on Friday"]
    assert load_progress(where / CHILD_FILE)[0].status == "completed"
