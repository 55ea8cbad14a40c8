"""A long one-step run through the real engine and store, fast enough for thousands of turns.

Run as a script (a real process a test can SIGKILL through ``FLOW_CRASH_AT``)::

    python tests/support/long_run.py FOLDER TURNS
        [--steps N] [--reply BYTES] [--result BYTES] [--pace S]

It writes ``FOLDER/long.prompt.md`` (``N`` steps) and runs it into ``FOLDER/run/progress.md``
with a model that, in each step, calls the tool ``probe`` ``TURNS`` times and then answers, and
a tool that returns at once. Both are in-process and instant, so the time is flow's own.
``probe`` is declared as an idempotent command in the workflow, so ``flow resume`` (with
``--provider echo``) accepts the run. Each step boundary folds the journal into the file.
``--pace`` makes the tool take that many seconds, for tests that watch a run from outside.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from promptflow_resume.base.redact import Redactor
from promptflow_resume.chat import ToolCall, ToolSpec
from promptflow_resume.progress import ProgressStore
from promptflow_resume.providers.provider import Reply, ReplyUsage, Request
from promptflow_resume.run.attempt import new_run
from promptflow_resume.run.engine import Engine, EngineOptions
from promptflow_resume.run.events import Reporter
from promptflow_resume.tools.tool import ToolContext, ToolResult
from promptflow_resume.workflow import load_workflow

HEADER = """---
description: A long loop
commands:
  probe:
    description: Look at something
    argv: ["true"]
    idempotent: true
tools: [probe]
---
You are a patient prober.
"""


def workflow_text(steps: int) -> str:
    """The loop workflow with ``steps`` steps (the first is named ``loop``)."""
    parts = [HEADER, "\n## Step 1: Loop\nCall the tool until you are done.\n"]
    parts.extend(f"\n## Step {n}: Probe {n}\nProbe again.\n" for n in range(2, steps + 1))
    return "".join(parts)


class LoopModel:
    """Per step: ``turns`` replies of ``reply_bytes`` with one tool call each, then a final
    answer (steps run one after another, so a count of calls tells where a run is)."""

    name = "loop"

    def __init__(self, turns: int, reply_bytes: int) -> None:
        self.turns = turns
        self.reply = ("the model looks once more " * (reply_bytes // 26 + 1))[:reply_bytes]
        self.done = 0

    def complete(self, request: Request, on_text: Callable[[str], None] | None = None) -> Reply:
        """Reply at once (counting calls itself: scanning the request would cost the model)."""
        done, self.done = self.done, self.done + 1
        usage = ReplyUsage(input_tokens=100, output_tokens=10)
        if done % (self.turns + 1) == self.turns:
            return Reply(content="Done probing.", usage=usage)
        call = ToolCall(id=f"call-{done}", name="probe", arguments=f'{{"n": {done}}}')
        return Reply(content=self.reply, tool_calls=(call,), usage=usage)


class InstantTool:
    """A tool that returns ``result_bytes`` of text at once."""

    spec = ToolSpec("probe", "Look at something.", {"type": "object", "properties": {}})
    idempotent = True

    def __init__(self, result_bytes: int, pace: float = 0.0) -> None:
        self.text = ("line of tool output\n" * (result_bytes // 20 + 1))[:result_bytes]
        self.pace = pace

    def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Return the fixed text (after ``pace`` seconds)."""
        if self.pace:
            time.sleep(self.pace)
        return ToolResult(self.text)


def run_loop(
    folder: Path,
    turns: int,
    *,
    steps: int = 1,
    reply_bytes: int = 40,
    result_bytes: int = 40,
    pace: float = 0.0,
) -> Path:
    """Run the loop workflow in ``folder``; return its progress path."""
    workflow_path = folder / "long.prompt.md"
    workflow_path.write_text(workflow_text(steps), encoding="utf-8")
    workflow = load_workflow(workflow_path)
    progress = folder / "run" / "progress.md"
    run = new_run(workflow, {}, progress, provider="echo")
    store = ProgressStore.create(progress, run)
    options = EngineOptions(workspace=folder, reporter=Reporter(), redactor=Redactor())
    model = LoopModel(turns, reply_bytes)
    engine = Engine(
        workflow, run, store, model, {"probe": InstantTool(result_bytes, pace)}, options
    )
    try:
        engine.execute()
    finally:
        store.close()
    return progress


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("turns", type=int)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--reply", type=int, default=40)
    parser.add_argument("--result", type=int, default=40)
    parser.add_argument("--pace", type=float, default=0.0)
    args = parser.parse_args()
    run_loop(
        args.folder,
        args.turns,
        steps=args.steps,
        reply_bytes=args.reply,
        result_bytes=args.result,
        pace=args.pace,
    )
