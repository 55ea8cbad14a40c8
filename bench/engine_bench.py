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
from promptflow_resume.engine import Engine, EngineOptions  # noqa: E402
from promptflow_resume.progress import ProgressStore  # noqa: E402
from promptflow_resume.providers.base import Reply, ReplyUsage, Request  # noqa: E402
from promptflow_resume.tools.base import ToolContext, ToolResult  # noqa: E402
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


def flow_turns(turns: int, folder: Path) -> tuple[float, Path]:
    """Seconds for ``turns`` turns through the real engine and store; and the progress path."""
    from promptflow_resume.attempt import new_run
    from promptflow_resume.base.redact import Redactor
    from promptflow_resume.events import Reporter

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
    start = time.perf_counter()
    try:
        engine.execute()
    finally:
        store.close()
    elapsed = time.perf_counter() - start
    assert run.status == "completed", (run.status, run.reason)
    # Every turn must have run the tool (an unknown-tool error result would skip its writes).
    results = [e for e in run.transcript if e.role == "tool_result"]
    assert len(results) == turns and not any(e.is_error for e in results)
    return elapsed, progress


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


def peer_turns(kind: str, turns: int, python: str = sys.executable) -> float | None:
    """Seconds for the peer's run of ``turns`` turns, in a subprocess of ``python``; None if
    not installed there."""
    with tempfile.TemporaryDirectory() as tmp:
        result = subprocess.run(
            [python, str(Path(__file__).parent / "peers.py"), kind, str(turns), tmp],
            capture_output=True,
            text=True,
            check=False,
        )
    if result.returncode != 0:
        return None
    return float(result.stdout.strip().splitlines()[-1])


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
    header = (
        f"{'turns':>7} | {'flow ms/turn':>12} | {'x floor':>7} | {'LangGraph ms/turn':>17} | "
        f"{'flow/LG':>7} | {'DBOS ms/turn':>12} | {'flow/DBOS':>9} | {'flow resume ms':>14}"
    )
    print(header)
    print("-" * len(header))
    base: float | None = None
    for turns in args.turns:
        with tempfile.TemporaryDirectory() as tmp:
            seconds, progress = flow_turns(turns, Path(tmp))
            per_turn = seconds / turns
            base = base or per_turn
            interrupt_midway(progress)
            resume = resume_seconds(progress)
        lg = db = None
        if not args.no_peers and turns <= args.peer_max:
            lg = peer_turns("langgraph", turns, args.peer_python)
            db = peer_turns("dbos", turns, args.peer_python)
        lg_ms = f"{lg / turns * 1000:.3f}" if lg else "-"
        db_ms = f"{db / turns * 1000:.3f}" if db else "-"
        lg_ratio = f"{per_turn / (lg / turns):.2f}" if lg else "-"
        db_ratio = f"{per_turn / (db / turns):.2f}" if db else "-"
        print(
            f"{turns:>7} | {per_turn * 1000:>12.3f} | {per_turn / floor:>7.2f} | {lg_ms:>17} | "
            f"{lg_ratio:>7} | {db_ms:>12} | {db_ratio:>9} | {resume * 1000:>14.0f}"
        )
    print(
        "\nflow/LG and flow/DBOS: flow's time per turn divided by the peer's (goal <= 0.5 at "
        "1,000 turns). Goals: flat per-turn cost (10,000 within 1.3x of 100), resume < 500 ms."
    )


if __name__ == "__main__":
    main()
