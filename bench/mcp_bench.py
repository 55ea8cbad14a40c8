"""Benchmark: what one MCP tool call costs next to a built-in tool call.

A stdio MCP server written with the ``mcp`` SDK (this file, run with ``--serve``) offers
``read_notes``, which returns a short text, like the built-in ``read_file`` reading a short
file. Rows:

- tool only: 1,000 calls of ``tool.run`` (the built-in; the MCP tool through flow's client,
  which hands each call to the SDK's event loop thread), and the same 1,000 calls made
  directly with the SDK's ``ClientSession`` on its own loop (what the protocol costs
  without flow's thread hop);
- whole run: ``start_run`` of a workflow whose scripted model calls the tool once per turn,
  200 turns, every call journaled (start and result) as in any run: the cost a user sees
  (timed from the step's start to the run's end, so the server's start is not in it);
- server start: starting the server, ``initialize`` and ``tools/list``.

Medians of per-call times; ratio against the built-in::

    python bench/mcp_bench.py
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

CALLS = 1000
TURNS = 200
NOTES = "ship on Friday\nreview on Monday\n"


def serve(state: str) -> None:
    """Run the benchmark's MCP server on stdio."""
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    server = MCPServer("notes")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def read_notes() -> str:
        """Read every note."""
        return NOTES

    server.run()


def _config(folder: Path) -> Path:
    config = folder / "mcp.json"
    entry = {"command": sys.executable, "args": [__file__, "--serve", str(folder)]}
    config.write_text(json.dumps({"servers": {"notes": entry}}), encoding="utf-8")
    return config


def _per_call(fn: object, n: int) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return times


def tool_rows(folder: Path) -> tuple[dict[str, float], float]:
    from promptflow_resume.tools.builtin import ReadFile
    from promptflow_resume.tools.mcp import McpServers
    from promptflow_resume.tools.mcp_config import load_config
    from promptflow_resume.tools.tool import ToolContext

    (folder / "notes.txt").write_text(NOTES, encoding="utf-8")
    ctx = ToolContext(folder)
    builtin = ReadFile()
    rows = {
        "built-in read_file": statistics.median(
            _per_call(lambda: builtin.run({"path": "notes.txt"}, ctx), CALLS)
        )
    }
    config = load_config(_config(folder), workspace=folder, env={})
    servers = McpServers(config, wanted=["notes/*"])
    start = time.perf_counter()
    servers.offer()
    started = time.perf_counter() - start
    try:
        tool = servers.tools["read_notes"]
        rows["MCP read_notes (flow's client)"] = statistics.median(
            _per_call(lambda: tool.run({}, ctx), CALLS)
        )
    finally:
        servers.close()
    rows["MCP read_notes (SDK directly)"] = asyncio.run(_sdk_direct(folder))
    return rows, started


async def _sdk_direct(folder: Path) -> float:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=[__file__, "--serve", str(folder)])
    times = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for _ in range(CALLS):
            start = time.perf_counter()
            await session.call_tool("read_notes", {})
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def run_rows(folder: Path) -> dict[str, float]:
    from promptflow_resume.api import RunOptions, StartRequest, start_run
    from promptflow_resume.run.events import Reporter

    class Clock(Reporter):
        """Times the engine's work only: from the step's start to the run's end."""

        began = ended = 0.0

        def step_started(
            self, step_id: str, title: str, index: int, total: int, agent: str | None = None
        ) -> None:
            self.began = time.perf_counter()

        def close(self) -> None:
            self.ended = time.perf_counter()

    rows = {}
    for label, tools, call in (
        (
            "built-in read_file",
            "[read_file]",
            {"name": "read_file", "arguments": {"path": "notes.txt"}},
        ),
        ("MCP read_notes", "['notes/*']", {"name": "read_notes", "arguments": {}}),
    ):
        where = Path(tempfile.mkdtemp(dir=folder))
        (where / "notes.txt").write_text(NOTES, encoding="utf-8")
        (where / "w.prompt.md").write_text(
            f"---\nprovider: scripted\ntools: {tools}\n---\nRead the notes {TURNS} times.\n",
            encoding="utf-8",
        )
        replies = [{"content": "reading", "tool_calls": [call]} for _ in range(TURNS)]
        (where / "s.json").write_text(json.dumps({"replies": [*replies, "done"]}), "utf-8")
        clock = Clock()
        outcome = start_run(
            StartRequest(
                where / "w.prompt.md",
                recording=where / "s.json",
                progress=where / "run" / "progress.md",
            ),
            RunOptions(
                workspace=where,
                mcp_config=_config(where) if "MCP" in label else None,
                reporter=clock,
            ),
        )
        assert outcome.run.status == "completed", outcome.run.reason
        rows[label] = (clock.ended - clock.began) / TURNS
    return rows


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rows, started = tool_rows(folder)
        whole = run_rows(folder)
    base = rows["built-in read_file"]
    print(f"MCP tool calls over stdio vs a built-in tool ({CALLS:,} calls; medians)\n")
    print(f"{'tool only':<34} {'per call':>10} {'ratio':>8}")
    for label, value in rows.items():
        print(f"{label:<34} {value * 1e3:>8.3f}ms {value / base:>7.1f}x")
    base_run = whole["built-in read_file"]
    print(f"\n{'whole run, per turn (' + str(TURNS) + ' turns)':<34} {'per turn':>10} {'ratio':>8}")
    for label, value in whole.items():
        print(f"{label:<34} {value * 1e3:>8.3f}ms {value / base_run:>7.2f}x")
    print(f"\nserver start (spawn, initialize, tools/list): {started * 1e3:.0f} ms")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--serve":
        serve(sys.argv[2])
    else:
        main()
