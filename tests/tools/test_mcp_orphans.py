"""No MCP server process outlives ``flow``: servers started through wrappers (``sh -c`` →
``sh -c`` → python, ``npx`` → ``sh`` → ``node``) die with their whole tree when ``flow`` is
SIGKILLed in the middle of a call, and the killed call never has its effect later.

The default run kills ``flow`` 3 times; ``python -m pytest --slow -m slow -n0 -s`` 20 times
and prints the orphan count. Each process of a chain carries a token (in argv, and in its
environment through the configuration's ``env``), so ``/proc`` tells whether any of them is
still alive.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from promptflow_resume.progress import load_progress
from tests import support
from tests.support.flowproc import flow_env, spawn
from tests.support.trust import trusted

SERVER = support.SUPPORT / "mcp_slow_server.py"
#: How long the slow tool sleeps before its effect.
SLEEP = 3.0
#: What "at once" means for the tree to be gone after ``flow`` is killed.
GONE_WITHIN = 2.0
EVERYTHING = "@modelcontextprotocol/server-everything"

WORKFLOW = """---
description: Write the marker slowly
provider: scripted
tools: ['{server}/*']
---
You write markers.

## Step 1: Write
Write the marker.
"""
RUN = ("run", "w.prompt.md", "--recording", "s.json", "--progress", "run/progress.md", "--new")


def alive_with(token: str) -> list[int]:
    """Pids of live processes whose argv or environment holds ``token``."""
    found = []
    needle = token.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                if stat.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
            blob = Path(f"/proc/{name}/cmdline").read_bytes()
            with contextlib.suppress(PermissionError):
                blob += Path(f"/proc/{name}/environ").read_bytes()
        except (OSError, IndexError):
            continue
        if needle in blob:
            found.append(int(name))
    return found


def wait_gone(token: str, seconds: float) -> list[int]:
    """Wait up to ``seconds`` for every process holding ``token`` to end; those left."""
    deadline = time.monotonic() + seconds
    while True:
        left = alive_with(token)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.02)


def kill_leftovers(token: str) -> None:
    for pid in alive_with(token):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def chain_workspace(where: Path, token: str, sleep: float = SLEEP) -> Path:
    """A workspace whose ``slow`` server is ``sh -c`` → ``sh -c`` → the python server."""
    (where / ".vscode").mkdir(parents=True)
    (where / "w.prompt.md").write_text(WORKFLOW.format(server="slow"), encoding="utf-8")
    call = {"name": "slow_write", "arguments": {"text": "x"}}
    reply = {"content": "Writing.", "tool_calls": [call]}
    (where / "s.json").write_text(json.dumps({"replies": [reply, "Done."]}), encoding="utf-8")
    server = shlex.join([sys.executable, str(SERVER), str(where / "state"), str(sleep), token])
    # `; true` keeps each shell waiting for its child (no exec of the last command).
    inner = shlex.join(["sh", "-c", f"{server}; true", token])
    entry = {
        "command": "sh",
        "args": ["-c", f"{inner}; true", token],
        "env": {"ORPHAN_TOKEN": token},
    }
    (where / ".vscode" / "mcp.json").write_text(json.dumps({"servers": {"slow": entry}}))
    trusted(where)
    return where


def wait_for(path: Path, proc: subprocess.Popen[str], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.01)


def kill_mid_call(where: Path, token: str) -> tuple[list[int], bool]:
    """SIGKILL ``flow`` while the slow call is in flight: (processes left after
    ``GONE_WITHIN`` s, whether the call's effect appeared after the sleep)."""
    state = where / "state"
    proc = spawn(*RUN, cwd=where, env=flow_env())
    try:
        wait_for(state / "started", proc)
        started = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        left = wait_gone(token, GONE_WITHIN)
        time.sleep(max(0.0, started + SLEEP + 1.0 - time.monotonic()))
        return left, (state / "marker").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        kill_leftovers(token)


def sigkill_rounds(tmp_path: Path, rounds: int) -> None:
    orphans = effects = 0
    for round_no in range(rounds):
        token = f"orphan-{uuid.uuid4().hex}"
        where = chain_workspace(tmp_path / f"r{round_no}", token)
        left, effect = kill_mid_call(where, token)
        orphans += len(left)
        effects += effect
    print(f"\nSIGKILL rounds: {rounds}, orphan processes: {orphans}, late effects: {effects}")
    assert (orphans, effects) == (0, 0)


@pytest.mark.slow
def test_sigkill_of_flow_ends_a_wrapped_server_tree(tmp_path: Path) -> None:
    sigkill_rounds(tmp_path, 3)


@pytest.mark.soak
def test_sigkill_of_flow_ends_a_wrapped_server_tree_many_times(tmp_path: Path) -> None:
    sigkill_rounds(tmp_path, 20)


def test_ctrl_c_during_a_call_says_what_it_stops_and_stops_it(tmp_path: Path) -> None:
    token = f"orphan-{uuid.uuid4().hex}"
    where = chain_workspace(tmp_path / "ws", token, sleep=60)
    proc = spawn(*RUN, cwd=where, env=flow_env())
    try:
        wait_for(where / "state" / "started", proc)
        began = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
        took = time.monotonic() - began
        assert proc.returncode == 130, stderr
        assert "stopping MCP server slow (call slow_write in flight)…" in stderr
        assert took < 5, f"Ctrl-C took {took:.1f} s"  # bench/mcp_stop_bench.py measures it
        assert wait_gone(token, GONE_WITHIN) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        kill_leftovers(token)
    run, _ = load_progress(where / "run" / "progress.md")
    assert run.status == "interrupted"
    assert [flight.tool for flight in run.in_flight] == ["slow_write"]  # resume decides
    assert not (where / "state" / "marker").exists()


COMMAND_WORKFLOW = """---
description: Run the slow command
provider: scripted
commands:
  slow:
    description: Wait, then write the marker
    argv: ["sh", "-c", "sh -c 'touch started; sleep {sleep}; touch marker; true' {token}; true"]
    timeout: 60
tools: [slow]
---
Run it.
"""


def test_sigkill_of_flow_ends_a_running_command_tree(tmp_path: Path) -> None:
    token = f"orphan-{uuid.uuid4().hex}"
    where = tmp_path / "ws"
    where.mkdir()
    text = COMMAND_WORKFLOW.format(sleep=SLEEP, token=token)
    (where / "w.prompt.md").write_text(text, encoding="utf-8")
    reply = {"content": "Running.", "tool_calls": [{"name": "slow", "arguments": {}}]}
    (where / "s.json").write_text(json.dumps({"replies": [reply, "Done."]}), encoding="utf-8")
    proc = spawn(*RUN, cwd=where, env=flow_env())
    try:
        wait_for(where / "started", proc)
        started = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        assert wait_gone(token, GONE_WITHIN) == []
        time.sleep(max(0.0, started + SLEEP + 1.0 - time.monotonic()))
        assert not (where / "marker").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        kill_leftovers(token)


# --- the real npx server ------------------------------------------------------------------


@pytest.fixture(scope="session")
def npm_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private npm cache holding ``@modelcontextprotocol/server-everything`` (skips when npm
    or its registry cannot be reached)."""
    if shutil.which("npm") is None or shutil.which("npx") is None:
        pytest.skip("npm is not installed")
    cache = tmp_path_factory.mktemp("npm-cache")
    env = {**os.environ, "npm_config_cache": str(cache), "npm_config_update_notifier": "false"}
    try:
        subprocess.run(
            ["npm", "view", EVERYTHING, "version"],
            env=env,
            capture_output=True,
            check=True,
            timeout=60,
        )
        # A first start fetches the package into the cache; with stdin closed it then exits.
        subprocess.run(
            ["npx", "-y", EVERYTHING],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=True,
            timeout=300,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        pytest.skip(f"the npm registry is not reachable: {error}")
    return cache


@pytest.mark.slow
def test_sigkill_of_flow_ends_npx_server_everything(tmp_path: Path, npm_cache: Path) -> None:
    token = f"orphan-{uuid.uuid4().hex}"
    where = tmp_path / "ws"
    (where / ".vscode").mkdir(parents=True)
    (where / "w.prompt.md").write_text(WORKFLOW.format(server="everything"), encoding="utf-8")
    call = {"name": "trigger-long-running-operation", "arguments": {"duration": 30, "steps": 30}}
    reply = {"content": "Working.", "tool_calls": [call]}
    (where / "s.json").write_text(json.dumps({"replies": [reply, "Done."]}), encoding="utf-8")
    entry = {
        "command": "npx",
        "args": ["-y", EVERYTHING],
        "env": {
            "npm_config_cache": str(npm_cache),
            "npm_config_update_notifier": "false",
            "ORPHAN_TOKEN": token,
        },
    }
    (where / ".vscode" / "mcp.json").write_text(json.dumps({"servers": {"everything": entry}}))
    trusted(where)
    proc = spawn(*RUN, cwd=where, env=flow_env())
    try:
        # The call is in flight once its start is journaled in the run folder.
        deadline = time.monotonic() + 120
        while not _mentions(where / "run", "trigger-long-running-operation"):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the call never started"
            time.sleep(0.05)
        assert alive_with(token), "the server's processes are not found by their token"
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        left = wait_gone(token, GONE_WITHIN)
        print(f"\nnpx server-everything: processes left after SIGKILL of flow: {len(left)}")
        assert left == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        kill_leftovers(token)


def _mentions(folder: Path, text: str) -> bool:
    if not folder.is_dir():
        return False
    for path in folder.iterdir():
        if path.is_file() and not path.name.endswith(".log"):
            try:
                if text in path.read_text(encoding="utf-8", errors="replace"):
                    return True
            except OSError:
                continue
    return False
