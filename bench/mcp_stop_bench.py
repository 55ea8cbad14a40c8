"""Benchmark: how fast an MCP server's process tree stops when ``flow`` stops mid-call.

Real ``flow run`` subprocesses whose scripted model calls a tool that takes a minute; while
the call is in flight ``flow`` gets:

- SIGINT (Ctrl-C): time until ``flow`` has exited (its progress saved, exit 130);
- SIGKILL: time until no process of the server's tree is alive (found in ``/proc`` by a
  token in their environment).

Servers: a Python server built with the ``mcp`` SDK (this file, run with ``--serve``) behind
``sh -c`` → ``sh -c`` (a wrapper chain like ``npx``'s), and, when npm can fetch it, the real
``npx -y @modelcontextprotocol/server-everything`` with its ``trigger-long-running-operation``.
A last row times the supervisor's own start (``python -I -S supervisor.py ... -- true``
against ``true``). Medians and maxima over ROUNDS::

    python bench/mcp_stop_bench.py [ROUNDS]
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EVERYTHING = "@modelcontextprotocol/server-everything"
WORKFLOW = """---
description: Call the slow tool
provider: scripted
tools: ['{server}/*']
---
Call the tool.
"""
FLOW = (sys.executable, "-m", "promptflow_resume")
FLOW_RUN = (*FLOW, "run", "w.prompt.md", "--recording", "s.json", "--progress", "run/p.md", "--new")
#: Seconds the bench waits for a tree to end after SIGKILL of flow.
CAP = 30.0
#: Makes a workspace in a folder for a token; returns what appears once the call started.
Make = Callable[[Path, str], Path]


def serve(state: str) -> None:
    """Run the benchmark's slow MCP server on stdio."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("slow")

    @server.tool()
    def slow_write(text: str) -> str:
        """Wait a minute, then write ``text``."""
        (Path(state) / "started").write_text(text, encoding="utf-8")
        time.sleep(60)
        return text

    server.run()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


def _alive(token: str) -> bool:
    needle = token.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if needle in Path(f"/proc/{name}/environ").read_bytes():
                stat = Path(f"/proc/{name}/stat").read_bytes()
                if stat.rsplit(b")", 1)[1].split()[0] != b"Z":
                    return True
        except (OSError, IndexError):
            continue
    return False


def _workspace(where: Path, server: str, entry: Mapping[str, object], call: object) -> None:
    (where / ".vscode").mkdir(parents=True)
    (where / "w.prompt.md").write_text(WORKFLOW.format(server=server), encoding="utf-8")
    replies = [{"content": "Calling.", "tool_calls": [call]}, "Done."]
    (where / "s.json").write_text(json.dumps({"replies": replies}), encoding="utf-8")
    (where / ".vscode" / "mcp.json").write_text(json.dumps({"servers": {server: entry}}))


def _python_chain(where: Path, token: str) -> Path:
    """A workspace with the slow server behind two ``sh -c``; returns the call's start file."""
    state = where / "state"
    state.mkdir(parents=True)
    server = shlex.join([sys.executable, __file__, "--serve", str(state)])
    inner = shlex.join(["sh", "-c", f"{server}; true"])
    entry = {"command": "sh", "args": ["-c", f"{inner}; true"], "env": {"BENCH_TOKEN": token}}
    _workspace(where, "slow", entry, {"name": "slow_write", "arguments": {"text": "x"}})
    return state / "started"


def _npx(cache: Path) -> Make:
    def make(where: Path, token: str) -> Path:
        env = {"npm_config_cache": str(cache), "BENCH_TOKEN": token}
        entry = {"command": "npx", "args": ["-y", EVERYTHING], "env": env}
        args = {"duration": 60, "steps": 60}
        call = {"name": "trigger-long-running-operation", "arguments": args}
        _workspace(where, "everything", entry, call)
        return where / "run"

    return make


def _in_flight(started: Path, call_name: str) -> bool:
    """The call has started: its start file exists, or its start is journaled in the run."""
    if started.is_file():
        return True
    if started.is_dir():
        for path in started.iterdir():
            try:
                if path.suffix != ".log" and call_name in path.read_text("utf-8", "replace"):
                    return True
            except OSError:  # a temporary file renamed meanwhile
                continue
    return False


def _one(make: Make, call_name: str, sig: signal.Signals) -> float:
    """Seconds from ``sig`` to flow's exit (SIGINT) or to the tree's end (SIGKILL)."""
    token = f"bench-{uuid.uuid4().hex}"
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        started = make(where, token)
        proc = subprocess.Popen(
            [*FLOW_RUN],
            cwd=where,
            env=_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 120
        while not _in_flight(started, call_name):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the call never started: {proc.communicate()[1]!r}")
            time.sleep(0.01)
        time.sleep(0.2)
        began = time.monotonic()
        proc.send_signal(sig)
        proc.communicate(timeout=60)
        exited = time.monotonic() - began
        while _alive(token) and time.monotonic() - began < CAP:
            time.sleep(0.005)
        gone = time.monotonic() - began
        return exited if sig == signal.SIGINT else gone


def _supervisor_start(rounds: int) -> tuple[float, float] | None:
    """Median start of ``true``, directly and under the supervisor (None: no supervisor)."""
    sys.path.insert(0, str(REPO))  # this checkout's package, not an installed one
    try:
        from promptflow_resume.base.supervisor import supervised
    except ImportError:  # a checkout from before the supervisor
        return None

    def run(argv: list[str]) -> float:
        began = time.perf_counter()
        subprocess.run(argv, check=True, start_new_session=True)
        return time.perf_counter() - began

    true = shutil.which("true") or "true"
    plain = statistics.median(run([true]) for _ in range(rounds * 4))
    wrapped = statistics.median(run(supervised([true])) for _ in range(rounds * 4))
    return plain, wrapped


def _cell(times: list[float]) -> str:
    """``median / max`` seconds; ``>= 30`` where the tree outlived the bench's wait."""

    def one(value: float) -> str:
        return f"{'>=30':>5}s" if value >= CAP else f"{value:>5.2f}s"

    return f"{one(statistics.median(times)):>13} / {one(max(times))}"


def _npm_cache() -> Path | None:
    """A temp npm cache holding server-everything, or None when npm cannot fetch it."""
    if shutil.which("npx") is None:
        return None
    cache = Path(tempfile.mkdtemp(prefix="flow-bench-npm-"))
    env = {**os.environ, "npm_config_cache": str(cache)}
    try:
        subprocess.run(
            ["npx", "-y", EVERYTHING],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=True,
            timeout=300,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return None
    return cache


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    servers: list[tuple[str, Make, str]] = [
        ("python server via sh -c → sh -c", _python_chain, "slow_write")
    ]
    cache = _npm_cache()
    if cache is not None:
        servers.append(("npx server-everything", _npx(cache), "trigger-long-running-operation"))
    print(f"Stopping an MCP server mid-call ({rounds} rounds; median / max)\n")
    print(f"{'server':<34} {'Ctrl-C → flow exits':>22} {'SIGKILL → tree gone':>22}")
    for label, make, call_name in servers:
        stops = [_one(make, call_name, signal.SIGINT) for _ in range(rounds)]
        kills = [_one(make, call_name, signal.SIGKILL) for _ in range(rounds)]
        print(f"{label:<34} {_cell(stops)} {_cell(kills)}")
    if cache is None:
        print("(npx server-everything skipped: npm cannot fetch it here)")
    else:
        shutil.rmtree(cache, ignore_errors=True)
    started = _supervisor_start(rounds)
    if started is None:
        return
    plain, wrapped = started
    print(
        f"\nstarting `true`: {plain * 1e3:.1f} ms directly, {wrapped * 1e3:.1f} ms under the "
        f"supervisor (+{(wrapped - plain) * 1e3:.1f} ms per server start)"
    )


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--serve":
        serve(sys.argv[2])
    else:
        main()
