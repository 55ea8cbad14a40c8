"""What decides an MCP call in flight is what was recorded when it started, never today's
configuration; and reading a run (``flow status``) starts no server.

The server is ``tests/support/mcp_servers.py`` (a real MCP server on the SDK). ``append_note``
has no annotations; each configuration says per tool whether a call may run again
(``flow.idempotent``). A run is killed (SIGKILL) while the server holds its first call.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from promptflow_resume.progress import load_progress
from tests.support.faults import assert_clean_error
from tests.support.flowproc import flow, flow_env, spawn
from tests.support.trust import trusted
from tests.tools.test_mcp_crash import SERVER, WORKFLOW, _notes

#: The crash tests' workflow; this model writes one note and stops.
REPLIES = [
    {"content": "Writing.", "tool_calls": [{"name": "append_note", "arguments": {"text": "one"}}]},
    "Done.",
]
RUN = ("run", "notes.prompt.md", "--recording", "s.json", "--progress", "run/progress.md")


def _server(where: Path, idempotent: bool, *extra: str) -> dict[str, object]:
    return {
        "command": sys.executable,
        "args": [str(SERVER), str(where / "state"), *extra],
        "flow": {"idempotent": {"append_note": idempotent}},
    }


def _workspace(where: Path, *, default_safe: bool) -> Path:
    """``.vscode/mcp.json`` says append_note may run again (``default_safe``) or not;
    ``other.json`` says it may not."""
    (where / ".vscode").mkdir(parents=True)
    (where / "notes.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    (where / "s.json").write_text(json.dumps({"replies": REPLIES}), encoding="utf-8")
    default = {"servers": {"notes": _server(where, default_safe)}}
    (where / ".vscode" / "mcp.json").write_text(json.dumps(default), encoding="utf-8")
    trusted(where)
    other = {"servers": {"notes": _server(where, False)}}
    (where / "other.json").write_text(json.dumps(other), encoding="utf-8")
    return where


def _starts(where: Path) -> int:
    starts = where / "state" / "starts"
    return len(starts.read_text().split()) if starts.exists() else 0


def _killed_holding(where: Path, hold: str, *options: str) -> None:
    """Run until the server holds (``hold-call``: the first call, before its effect;
    ``hold-after``: after it), kill flow (SIGKILL), then let the server go on."""
    state = where / "state"
    state.mkdir(exist_ok=True)
    (state / hold).write_text("1" if hold == "hold-call" else "", encoding="utf-8")
    proc = spawn(*RUN, "--new", *options, cwd=where, env=flow_env())
    deadline = time.monotonic() + 60
    while not (state / "holding").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    (state / hold).unlink()
    (state / "holding").unlink()


def _killed_mid_call(where: Path, *options: str) -> None:
    _killed_holding(where, "hold-call", *options)


@pytest.mark.slow
def test_resume_with_another_config_never_runs_an_unsafe_call_twice(tmp_path: Path) -> None:
    where = _workspace(tmp_path, default_safe=True)
    _killed_mid_call(where, "--mcp-config", "other.json")
    run, _ = load_progress(where / "run" / "progress.md")
    (flight,) = run.in_flight
    assert flight.idempotent is False
    assert flight.server is not None and flight.server["name"] == "notes"
    assert flight.server["config"] == "other.json"

    status = flow("status", "--json", "run/progress.md", cwd=where, env=flow_env())
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert data["retry_tools"] == [] and data["review_tools"] == [flight.call_id]
    # Without --mcp-config, resume reads .vscode/mcp.json, which calls the tool safe: the
    # record of the start decides, so the call is not run again.
    result = flow("resume", "run/progress.md", cwd=where, env=flow_env())
    assert_clean_error(result, 8, "not idempotent", "append_note")
    assert _notes(where) in ([], ["one"])  # at most the killed call's own effect
    before = _notes(where)
    again = flow("resume", "run/progress.md", cwd=where, env=flow_env())
    assert again.returncode == 8 and _notes(where) == before


def test_a_safe_call_runs_again_only_on_the_server_that_started_it(tmp_path: Path) -> None:
    where = _workspace(tmp_path, default_safe=True)
    _killed_mid_call(where)
    run, _ = load_progress(where / "run" / "progress.md")
    (flight,) = run.in_flight
    assert flight.idempotent is True and flight.server is not None
    assert flight.server["config"] == os.path.join(".vscode", "mcp.json")
    # The configuration now starts the server another way: running the call there could
    # repeat its effect elsewhere, so resume stops and names the configuration it needs.
    config = json.loads((where / ".vscode" / "mcp.json").read_text())
    config["servers"]["notes"]["args"].append("--variant")
    (where / ".vscode" / "mcp.json").write_text(json.dumps(config), encoding="utf-8")
    trusted(where)
    moved = flow("resume", "run/progress.md", cwd=where, env=flow_env())
    message = assert_clean_error(moved, 13, "in flight on the MCP server 'notes'")
    assert "--mcp-config .vscode/mcp.json" in message
    assert load_progress(where / "run" / "progress.md")[0].in_flight == [flight]
    # Back as it was: the call runs again, once.
    config["servers"]["notes"]["args"].pop()
    (where / ".vscode" / "mcp.json").write_text(json.dumps(config), encoding="utf-8")
    trusted(where)
    done = flow("resume", "run/progress.md", cwd=where, env=flow_env())
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "command",
    [
        ("status",),
        pytest.param(("status", "--json"), marks=pytest.mark.slow),
        pytest.param(("resume", "--plan"), marks=pytest.mark.slow),
    ],
)
def test_reading_a_run_with_an_mcp_call_in_flight_starts_no_server(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    where = _workspace(tmp_path, default_safe=True)
    _killed_mid_call(where)
    started = _starts(where)
    # A token in the configuration's environment would go to the server if it started.
    config = json.loads((where / ".vscode" / "mcp.json").read_text())
    config["servers"]["notes"]["env"] = {"GITHUB_TOKEN": "${env:GITHUB_TOKEN}"}
    (where / ".vscode" / "mcp.json").write_text(json.dumps(config), encoding="utf-8")
    trusted(where)
    env = flow_env(GITHUB_TOKEN="ghp_" + "a" * 36)
    result = flow(command[0], "run/progress.md", *command[1:], cwd=where, env=env)
    assert result.returncode == 0, result.stderr
    assert _starts(where) == started


@pytest.mark.slow
@pytest.mark.parametrize("resume_with_config", [False, True])
def test_killed_unsafe_calls_never_run_twice_whatever_the_resume_reads(
    tmp_path: Path, resume_with_config: bool
) -> None:
    """Many kills after an unsafe call took effect; each resume, with or without the run's
    own ``--mcp-config``, must stop for review instead of repeating it."""
    rounds = int(os.environ.get("FLOW_MCP_RECORDED_ROUNDS", "4"))
    counts = {"kills": 0, "reviews": 0, "ran_twice": 0}
    for n in range(rounds):
        where = _workspace(tmp_path / f"r{n}", default_safe=True)
        _killed_holding(where, "hold-after", "--mcp-config", "other.json")
        counts["kills"] += 1
        extra = ("--mcp-config", "other.json") if resume_with_config else ()
        result = flow("resume", "run/progress.md", *extra, cwd=where, env=flow_env())
        counts["reviews"] += result.returncode == 8
        counts["ran_twice"] += _notes(where) != ["one"]
    print(f"\nresume {'with' if resume_with_config else 'without'} --mcp-config: {counts}")
    assert counts == {"kills": rounds, "reviews": rounds, "ran_twice": 0}
