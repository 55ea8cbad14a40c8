"""Engine overhead per turn, next to the fsync floor and to LangGraph and DBOS.

A turn: one model reply (300 bytes, one tool call) and the tool's result (1 KiB); the model and
the tool answer at once, so the time is the engine's own: bookkeeping, redaction and durable
checkpoints. Every flow turn is crash-safe: the tool call's start is fsynced before the tool
runs, and its result before the next model call.

    python bench/engine_bench.py                 # 100, 1,000, 10,000 turns; peers if installed
    python bench/engine_bench.py --turns 100 1000 --no-peers

Peers (``pip install -e '.[bench]'``) run in their own subprocesses: LangGraph with its SQLite
checkpointer in ``durability="sync"`` mode, and DBOS with SQLite. LangGraph's cost per turn
grows with the run, so it is skipped above ``--peer-max`` turns.

The resume column is the time from starting ``flow resume`` (a new process) on a run of that
many turns to its first model reply from the instant ``echo`` provider.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from checkout import use_checkout

ROOT = use_checkout()

from promptflow_resume.chat import ToolCall, ToolSpec  # noqa: E402
from promptflow_resume.progress import ProgressStore  # noqa: E402
from promptflow_resume.providers.provider import Reply, ReplyUsage, Request  # noqa: E402
from promptflow_resume.run.engine import Engine, EngineOptions  # noqa: E402
from promptflow_resume.tools.tool import ToolContext, ToolResult  # noqa: E402
from promptflow_resume.workflow import load_workflow  # noqa: E402

REPLY = "The next step is to look at the build output once more, " * 5  # ~300 bytes
RESULT = "line of tool output with some detail in it .....\n" * 21  # ~1 KiB

# ``probe`` is declared so that the workflow offers it; the engine is handed the instant
# in-process tool under that name (the declared argv never runs).
WORKFLOW = """---
description: Benchmark loop
commands:
  probe:
    description: Look at something
    argv: ["true"]
    idempotent: true
tools: [probe]
---
You are a benchmark.

## Step 1: Loop
Call the tool until you are done.
"""


class InstantModel:
    """A provider that answers at once: ``turns`` replies with one tool call, then a final one."""

    name = "bench"

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.done = 0  # counted here: scanning the request would cost the model, not flow

    def complete(self, request: Request, on_text: Callable[[str], None] | None = None) -> Reply:
        done, self.done = self.done, self.done + 1
        usage = ReplyUsage(input_tokens=1000, output_tokens=80)
        if done >= self.turns:
            return Reply(content="All done.", usage=usage)
        call = ToolCall(id=f"call-{done}", name="probe", arguments=f'{{"n": {done}}}')
        return Reply(content=REPLY, tool_calls=(call,), usage=usage)


class InstantTool:
    """A tool that returns 1 KiB at once."""

    spec = ToolSpec("probe", "Look at something.", {"type": "object", "properties": {}})
    idempotent = True

    def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(RESULT)


def fsync_floor(folder: Path, count: int = 300) -> float:
    """Median seconds for appending 1.3 KiB to a file and fsyncing it."""
    line = b"x" * 1330 + b"\n"
    samples = []
    fd = os.open(folder / "floor.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for _ in range(count):
            start = time.perf_counter()
            os.write(fd, line)
            os.fsync(fd)
            samples.append(time.perf_counter() - start)
    finally:
        os.close(fd)
    return statistics.median(samples)


def flow_turns(turns: int, folder: Path) -> tuple[float, float, Path]:
    """Wall and CPU seconds for ``turns`` turns through the real engine and store; and the
    progress path."""
    from promptflow_resume.base.redact import Redactor
    from promptflow_resume.run.attempt import new_run
    from promptflow_resume.run.events import Reporter

    workflow_path = folder / "bench.prompt.md"
    workflow_path.write_text(WORKFLOW, encoding="utf-8")
    workflow = load_workflow(workflow_path)
    progress = folder / "run" / "progress.md"
    run = new_run(workflow, {}, progress, provider="echo")
    store = ProgressStore.create(progress, run)
    options = EngineOptions(
        workspace=folder, reporter=Reporter(), redactor=Redactor.from_environment()
    )
    engine = Engine(workflow, run, store, InstantModel(turns), {"probe": InstantTool()}, options)
    start, cpu = time.perf_counter(), time.process_time()
    try:
        engine.execute()
    finally:
        store.close()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert run.status == "completed", (run.status, run.reason)
    # Every turn must have run the tool (an unknown-tool error result would skip its writes).
    results = [e for e in run.transcript if e.role == "tool_result"]
    assert len(results) == turns and not any(e.is_error for e in results)
    return elapsed, cpu, progress


def interrupt_midway(progress: Path) -> None:
    """Mark a completed benchmark run as interrupted in its last step, after a tool result."""
    store, run, _ = ProgressStore.open(progress)
    try:
        last = run.transcript[-1]
        del run.transcript[-1:]  # drop the final answer: the run stopped after a tool result
        step = run.steps[last.step or ""]
        step.status = "running"
        step.output_entry = None
        run.cursor.step = last.step
        run.cursor.index = 1
        run.status = "interrupted"
        run.reason = "benchmark"
        store.checkpoint(run)
    finally:
        store.close()


def resume_seconds(progress: Path) -> float:
    """Process start of ``flow resume`` to its first model reply (echo answers at once)."""
    env = dict(os.environ, FLOW_CRASH_AT="engine.model_replied:1")
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "promptflow_resume", "resume", str(progress), "--provider", "echo"],
        env=env,
        cwd=tempfile.gettempdir(),  # outside every checkout: -m puts the folder on sys.path
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
    )
    return time.perf_counter() - start


def peer_turns(kind: str, turns: int, python: str = sys.executable) -> tuple[float, float] | None:
    """Wall and CPU seconds for the peer's run of ``turns`` turns, in a subprocess of
    ``python``; None if not installed there."""
    with tempfile.TemporaryDirectory() as tmp:
        result = subprocess.run(
            [python, str(Path(__file__).parent / "peers.py"), kind, str(turns), tmp],
            capture_output=True,
            text=True,
            check=False,
        )
    if result.returncode != 0:
        return None
    wall, cpu = result.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--no-peers", action="store_true", help="Measure flow only.")
    parser.add_argument("--peer-max", type=int, default=1000, help="Largest run given to peers.")
    parser.add_argument(
        "--peer-python",
        default=sys.executable,
        help="The interpreter the peers run in (a virtualenv of their own, say).",
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(
        dir=ROOT / "bench" if os.access(ROOT / "bench", os.W_OK) else None
    ) as tmp:
        floor = fsync_floor(Path(tmp))
    print(f"fsync floor (append 1.3 KiB + fsync, median): {floor * 1000:.3f} ms\n")
    print(
        "ms per turn, wall and CPU (the process's: flow's own work without the fsync waits);\n"
        "flow/peer: flow's time per turn divided by the peer's (issue 47's goal: <= 0.10, ten\n"
        "times faster, at 1,000 turns); flat per-turn cost: 10,000 within 1.3x of 100\n"
    )
    names = (
        "turns", "flow ms", "flow cpu ms", "x floor", "LangGraph ms", "LangGraph cpu ms",
        "flow/LG", "flow/LG cpu", "DBOS ms", "DBOS cpu ms", "flow/DBOS", "flow/DBOS cpu",
        "flow resume ms",
    )  # fmt: skip
    print(" | ".join(names))
    for turns in args.turns:
        with tempfile.TemporaryDirectory() as tmp:
            seconds, cpu, progress = flow_turns(turns, Path(tmp))
            interrupt_midway(progress)
            resume = resume_seconds(progress)
        wall_turn, cpu_turn = seconds / turns * 1000, cpu / turns * 1000
        cells = [
            f"{turns}",
            f"{wall_turn:.3f}",
            f"{cpu_turn:.3f}",
            f"{wall_turn / floor / 1000:.2f}",
        ]
        for kind in ("langgraph", "dbos"):
            peer = None
            if not args.no_peers and turns <= args.peer_max:
                peer = peer_turns(kind, turns, args.peer_python)
            if peer is None:
                cells += ["-"] * 4
                continue
            peer_wall, peer_cpu = peer[0] / turns * 1000, peer[1] / turns * 1000
            cells += [f"{peer_wall:.3f}", f"{peer_cpu:.3f}"]
            cells += [f"{wall_turn / peer_wall:.2f}", f"{cpu_turn / peer_cpu:.2f}"]
        cells.append(f"{resume * 1000:.0f}")
        print(" | ".join(cells))


if __name__ == "__main__":
    main()
