"""What context compaction saves on a long run: tokens sent and time, with and without it.

A one-step run of ``--turns`` model turns (default 5,000), each a short reply with one tool
call and a short tool result, through the real engine and progress store (every event
durable). The model and the tool are in-process and instant, so the time is flow's own. The
model counts what each request sends (characters / 4, flow's own estimate) and reports it as
the request's input usage, as a provider would. With compaction the workflow sets a small
``context_window`` (``--window``, default 8,000 tokens) and the model answers compaction
requests with a short summary; without it (``compaction: off``) the model accepts any size, so
the run shows what a model with an unlimited window would be sent.

    python bench/compaction_bench.py                  # 5,000 turns
    python bench/compaction_bench.py --turns 1000 --window 4000
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from checkout import use_checkout

ROOT = use_checkout()

from promptflow_resume.base.redact import Redactor  # noqa: E402
from promptflow_resume.chat import ToolCall, ToolSpec  # noqa: E402
from promptflow_resume.progress import ProgressStore, load_progress  # noqa: E402
from promptflow_resume.providers.provider import Purpose, Reply, ReplyUsage, Request  # noqa: E402
from promptflow_resume.run.attempt import new_run  # noqa: E402
from promptflow_resume.run.engine import Engine, EngineOptions  # noqa: E402
from promptflow_resume.run.events import Reporter  # noqa: E402
from promptflow_resume.tools.tool import ToolContext, ToolResult  # noqa: E402
from promptflow_resume.workflow import load_workflow  # noqa: E402

REPLY = "Looking once more at the output of the probe."  # ~45 characters
RESULT = "probe output: all values within range, nothing new"  # ~50 characters

WORKFLOW = """---
description: Compaction benchmark loop
{setting}
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


class CountingModel:
    """``turns`` replies with one tool call each, then an answer; compaction requests get a
    short summary. Counts the tokens every request sends."""

    name = "bench"

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.done = 0
        self.sent = 0
        self.calls = 0
        self.compactions = 0
        self.largest = 0

    def complete(self, request: Request, on_text: Callable[[str], None] | None = None) -> Reply:
        """Reply at once, counting what was sent (characters / 4 + 4 per message)."""
        size = sum(len(m.content) for m in request.messages) // 4 + 4 * len(request.messages)
        self.sent += size
        self.calls += 1
        self.largest = max(self.largest, size)
        usage = ReplyUsage(input_tokens=size, output_tokens=12)
        if request.purpose is Purpose.COMPACTION:
            self.compactions += 1
            return Reply(content=f"Probes 1 to {self.done} ran; all in range.", usage=usage)
        done, self.done = self.done, self.done + 1
        if done >= self.turns:
            return Reply(content="Done probing.", usage=usage)
        call = ToolCall(id=f"call-{done}", name="probe", arguments=f'{{"n": {done}}}')
        return Reply(content=REPLY, tool_calls=(call,), usage=usage)


class InstantTool:
    """A tool that returns a short fixed line at once."""

    spec = ToolSpec("probe", "Look at something.", {"type": "object", "properties": {}})
    idempotent = True

    def run(self, arguments: dict[str, object], ctx: ToolContext) -> ToolResult:
        """The fixed line."""
        return ToolResult(RESULT)


def one_run(folder: Path, turns: int, setting: str) -> tuple[CountingModel, float, int]:
    """Run the loop; return the model (its counts), seconds taken and the file's size."""
    path = folder / "loop.prompt.md"
    path.write_text(WORKFLOW.format(setting=setting), encoding="utf-8")
    workflow = load_workflow(path)
    progress = folder / "run" / "progress.md"
    run = new_run(workflow, {}, progress, provider="echo")
    store = ProgressStore.create(progress, run)
    model = CountingModel(turns)
    options = EngineOptions(workspace=folder, reporter=Reporter(), redactor=Redactor())
    engine = Engine(workflow, run, store, model, {"probe": InstantTool()}, options)
    began = time.perf_counter()
    try:
        engine.execute()
    finally:
        store.close()
    seconds = time.perf_counter() - began
    loaded, _ = load_progress(progress)
    results = sum(1 for e in loaded.transcript if e.role == "tool_result")
    assert loaded.status == "completed" and results == turns, (loaded.status, results)
    return model, seconds, progress.stat().st_size


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=5000)
    parser.add_argument("--window", type=int, default=8000)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, setting in (
            ("without compaction", "compaction: off"),
            ("with compaction", f"context_window: {args.window}"),
        ):
            folder = Path(tmp) / label.replace(" ", "-")
            folder.mkdir()
            model, seconds, size = one_run(folder, args.turns, setting)
            rows.append((label, model, seconds, size))
    print(
        f"{args.turns:,} turns (reply ~{len(REPLY)} chars + one tool call, result "
        f"~{len(RESULT)} chars); window {args.window:,} tokens, threshold 80%\n"
    )
    header = (
        f"{'run':<20} | {'model calls':>11} | {'compactions':>11} | {'tokens sent':>14} | "
        f"{'largest request':>15} | {'seconds':>8} | {'ms/turn':>7} | {'file KiB':>8}"
    )
    print(header)
    print("-" * len(header))
    for label, model, seconds, size in rows:
        print(
            f"{label:<20} | {model.calls:>11,} | {model.compactions:>11,} | {model.sent:>14,} | "
            f"{model.largest:>15,} | {seconds:>8.1f} | {seconds / args.turns * 1000:>7.2f} | "
            f"{size / 1024:>8,.0f}"
        )
    (_, off, off_s, _), (_, on, on_s, _) = rows
    print(
        f"\nratios (without / with): tokens sent {off.sent / on.sent:.1f}x, "
        f"largest request {off.largest / on.largest:.1f}x, time {off_s / on_s:.2f}x"
    )


if __name__ == "__main__":
    main()
